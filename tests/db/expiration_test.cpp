// NIP-40 in the database: the write path stores expires_at, every read path
// (history by each driver, COUNT, ids) stops serving a row at its expiration
// second, and the reaper deletes expired rows, with their tag rows, in
// bounded transactions, never waiting for a writer and never ending a
// NIP-09 tombstone. `now` is a parameter, so no test sleeps.

#include <optional>

#include "db/expiration_store.hpp"
#include "tests/db/write_fixture.hpp"

namespace waggle::pgtest {
namespace {

class ExpirationTest : public WriteTest {
 protected:
  std::optional<int64_t> expires_at(int64_t c, const std::string& id) {
    pqxx::nontransaction tx(conn());
    auto r = tx.exec_params(
      "SELECT expires_at FROM events WHERE community_id = $1 AND id = decode($2, 'hex')", c, id);
    if (r.empty() || r[0][0].is_null())
      return std::nullopt;
    return r[0][0].as<int64_t>();
  }
  int64_t all_tag_rows(int64_t c) {
    pqxx::nontransaction tx(conn());
    return tx.exec_params("SELECT count(*) FROM event_tags WHERE community_id = $1", c)[0][0]
      .as<int64_t>();
  }
  std::vector<std::string> read(int64_t c, const proto::filter& f, int64_t now) {
    return db::query_events(conn(), c, {f}, proto::filter_limits{}, now);
  }
  uint64_t count(int64_t c, const std::vector<proto::filter>& fs, int64_t now) {
    return db::count_events(conn(), c, fs, now);
  }
  // Reaps whatever this process's earlier tests left due at `t`, so that a
  // test's own counts are exact when the binary runs as one process.
  void settle(int64_t t) { db::reap_expired_events(conn(), t, {100'000, 100'000}); }
  static proto::event expiring(int signer, int64_t at, std::vector<proto::tag> tags = {},
                               int32_t kind = 1, int64_t created_at = 1000) {
    tags.push_back({"expiration", std::to_string(at)});
    return make_event(signer, kind, created_at, tags, "expires at " + std::to_string(at));
  }
};

TEST_F(ExpirationTest, TheWritePathStoresTheFirstExpirationTag) {
  auto c = community();
  auto plain = make_event(1, 1, 1000, {{"t", "x"}});
  auto timed = make_event(1, 1, 1001, {{"expiration", "5000"}, {"expiration", "10"}});
  EXPECT_EQ(write(c, {plain, timed})[1].outcome, write_outcome::stored);
  EXPECT_EQ(expires_at(c, plain.id), std::nullopt);
  EXPECT_EQ(expires_at(c, timed.id), std::optional<int64_t>{5000});
  // A malformed value never reaches a row (admission refuses it first; a
  // direct caller of the write path is refused here).
  auto bad = make_event(1, 1, 1002, {{"expiration", "-1"}});
  auto r = write(c, {bad});
  EXPECT_EQ(r[0].outcome, write_outcome::rejected);
  EXPECT_NE(r[0].reason.find("expiration"), std::string::npos) << r[0].reason;
  EXPECT_FALSE(exists(c, bad.id));
}

TEST_F(ExpirationTest, AnExpiredRowIsServedByNoReadPathFromItsExpirationSecond) {
  auto c = community();
  constexpr int64_t t = 50'000;
  auto timed = expiring(1, t, {{"t", "topic"}, {"p", std::string(64, 'b')}});
  auto forever = make_event(1, 1, 999, {{"t", "topic"}, {"p", std::string(64, 'b')}});
  ASSERT_EQ(write(c, {timed, forever})[0].outcome, write_outcome::stored);

  proto::filter all, by_kind, by_author, by_tag, by_two_tags, by_id, since;
  by_kind.kinds = std::vector<int32_t>{1};
  by_author.authors = std::vector<std::string>{timed.pubkey};
  by_tag.tags['t'] = {"topic"};
  by_two_tags.tags['t'] = {"topic"};
  by_two_tags.tags['p'] = {std::string(64, 'b')};
  by_id.ids = std::vector<std::string>{timed.id};
  since.since = 1000;
  const std::vector<std::pair<const char*, proto::filter>> paths = {
    {"global", all}, {"kinds", by_kind}, {"authors", by_author}, {"#t", by_tag},
    {"#t #p", by_two_tags}, {"ids", by_id}, {"since", since}};

  // One second before: served everywhere (an event expiring in the future is an ordinary event).
  for (const auto& [name, f] : paths) {
    auto got = read(c, f, t - 1);
    EXPECT_NE(std::find(got.begin(), got.end(), timed.raw), got.end()) << name;
    EXPECT_EQ(count(c, {f}, t - 1), f.ids || f.since ? 1u : 2u) << name;
  }
  // At the expiration second and after: served nowhere; the other event is.
  for (int64_t now : {t, t + 1, t + 1'000'000}) {
    for (const auto& [name, f] : paths) {
      auto got = read(c, f, now);
      EXPECT_EQ(std::find(got.begin(), got.end(), timed.raw), got.end()) << name << " @" << now;
      EXPECT_EQ(count(c, {f}, now), f.ids || f.since ? 0u : 1u) << name << " @" << now;
    }
    EXPECT_EQ(read(c, all, now), std::vector<std::string>{forever.raw});
    EXPECT_EQ(count(c, {by_id, by_tag, all}, now), 1u);
  }
  EXPECT_TRUE(exists(c, timed.id)) << "hidden, not deleted: that is the reaper's job";
}

TEST_F(ExpirationTest, TheReaperDeletesOnlyDueRowsInBoundedTransactions) {
  constexpr int64_t t = 80'000;
  settle(t);
  auto a = community("a");
  auto b = community("b");
  std::vector<proto::event> due_a, keep_a, due_b;
  for (int i = 0; i < 10; ++i)
    due_a.push_back(expiring(1, t - i, {{"t", "due"}, {"p", std::string(64, 'c')}}, 1, 1000 + i));
  for (int i = 0; i < 3; ++i)
    keep_a.push_back(expiring(1, t + 1 + i, {{"t", "later"}}, 1, 2000 + i));
  keep_a.push_back(make_event(1, 1, 3000, {{"t", "never"}}));
  for (int i = 0; i < 2; ++i)
    due_b.push_back(expiring(2, t - 100, {{"t", "due"}}, 1, 4000 + i));
  write(a, due_a);
  write(a, keep_a);
  write(b, due_b);
  // A soft-deleted expired row goes too: expired is expired, whatever its state.
  auto del = make_event(1, 5, 5000, {{"e", due_a[0].id}});
  ASSERT_EQ(write1(a, del), write_outcome::stored);
  ASSERT_FALSE(is_live(a, due_a[0].id));
  const auto tags_a = all_tag_rows(a);

  auto first = db::reap_expired_events(conn(), t, {3, 2});
  EXPECT_EQ(first.events, 6u);
  EXPECT_EQ(first.transactions, 2u);
  EXPECT_TRUE(first.more);
  EXPECT_EQ(all_rows(a), 10 + 4 + 1 - 6);

  auto rest = db::reap_expired_events(conn(), t, {3, 10});
  EXPECT_EQ(rest.events, 4u + 2u);
  EXPECT_EQ(rest.transactions, 2u + 1u);  // a: 3 + 1, b: 2
  EXPECT_FALSE(rest.more);
  EXPECT_EQ(db::reap_expired_events(conn(), t, {3, 10}).events, 0u);

  for (const auto& ev : due_a) {
    EXPECT_FALSE(exists(a, ev.id));
    EXPECT_EQ(tag_rows(a, ev.id), 0) << "its tag rows go with it";
  }
  for (const auto& ev : keep_a) {
    EXPECT_TRUE(is_live(a, ev.id));
    EXPECT_GT(tag_rows(a, ev.id), 0);
  }
  EXPECT_EQ(all_rows(b), 0);
  EXPECT_EQ(all_tag_rows(b), 0);
  EXPECT_EQ(all_tag_rows(a), tags_a - 10 * 2);
  EXPECT_TRUE(is_live(a, del.id));
}

TEST_F(ExpirationTest, TheReaperSkipsRowsAnotherTransactionHoldsAndNeverWaits) {
  constexpr int64_t t = 90'000;
  settle(t);
  auto c = community();
  auto held = expiring(1, t - 10);
  auto free = expiring(1, t - 5, {}, 1, 1001);
  write(c, {held, free});
  auto other = connect();
  pqxx::work writer(*other);
  writer.exec_params("SELECT 1 FROM events WHERE community_id = $1 AND id = decode($2, 'hex') "
                     "FOR UPDATE",
                     c, held.id);
  {
    pqxx::nontransaction tx(conn());
    tx.exec("SET lock_timeout = '2s'");  // a wait would fail the reap below, not hang
  }
  auto r = db::reap_expired_events(conn(), t, {10, 5});
  EXPECT_EQ(r.events, 1u);
  EXPECT_TRUE(exists(c, held.id));
  EXPECT_FALSE(exists(c, free.id));
  writer.commit();
  EXPECT_EQ(db::reap_expired_events(conn(), t, {10, 5}).events, 1u);
  EXPECT_FALSE(exists(c, held.id));
}

// An expired kind-5 deletion is reaped, but its `e`/`a` tag rows stay: what
// it deleted stays deleted, and what it names by id or coordinate is still
// refused when it arrives later.
TEST_F(ExpirationTest, AnExpiredDeletionKeepsItsTombstone) {
  constexpr int64_t t = 100'000;
  settle(t);
  auto c = community();
  auto target = make_event(1, 1, 1000, {{"t", "x"}});
  auto later_target = make_event(1, 1, 1001, {{"t", "y"}});  // named before it is stored
  auto article = make_event(1, 30023, 1000, {{"d", "post"}});
  ASSERT_EQ(write(c, {target, article})[1].outcome, write_outcome::stored);
  auto del = expiring(1, t,
                      {{"e", target.id}, {"e", later_target.id},
                       {"a", "30023:" + article.pubkey + ":post"}, {"k", "1"}},
                      5, 2000);
  ASSERT_EQ(write1(c, del), write_outcome::stored);
  ASSERT_FALSE(is_live(c, target.id));
  ASSERT_FALSE(is_live(c, article.id));

  EXPECT_EQ(db::reap_expired_events(conn(), t, {}).events, 1u);
  EXPECT_FALSE(exists(c, del.id));
  EXPECT_EQ(tag_rows(c, del.id), 3) << "the e and a rows remain, the k row goes";
  proto::filter kind5;
  kind5.kinds = std::vector<int32_t>{5};
  proto::filter by_e;
  by_e.tags['e'] = {target.id};
  EXPECT_TRUE(read(c, kind5, 0).empty());
  EXPECT_TRUE(read(c, by_e, 0).empty()) << "a tombstone row is never served";
  EXPECT_EQ(count(c, {by_e, kind5}, 0), 0u);

  EXPECT_EQ(write1(c, target), write_outcome::duplicate);
  EXPECT_FALSE(is_live(c, target.id));
  EXPECT_EQ(write1(c, later_target), write_outcome::superseded);
  EXPECT_FALSE(exists(c, later_target.id));
  auto older_article = make_event(1, 30023, 999, {{"d", "post"}}, "older");
  EXPECT_EQ(write1(c, older_article), write_outcome::superseded);
  EXPECT_EQ(live_rows(c), 0);
}

// The one-live-head index (events_live_coordinate) and an expiring head:
// replacing it before the reaper runs and reaping it as the head both leave
// exactly the versions a client should see.
TEST_F(ExpirationTest, AnExpiringReplaceableHeadIsReplacedOrReapedCleanly) {
  constexpr int64_t t = 110'000;
  settle(t);
  auto c = community();
  auto head = expiring(1, t, {}, 0, 1000);
  ASSERT_EQ(write1(c, head), write_outcome::stored);
  auto newer = make_event(1, 0, 1001, {}, "newer profile");
  ASSERT_EQ(write1(c, newer), write_outcome::stored);  // replaces it, expired or not
  EXPECT_FALSE(is_live(c, head.id));
  EXPECT_EQ(db::reap_expired_events(conn(), t, {}).events, 1u);
  EXPECT_TRUE(is_live(c, newer.id));

  auto d = community("addressable");
  auto timed = expiring(1, t, {{"d", "x"}}, 30000, 1000);
  ASSERT_EQ(write1(d, timed), write_outcome::stored);
  EXPECT_EQ(db::reap_expired_events(conn(), t, {}).events, 1u);
  auto next = make_event(1, 30000, 1002, {{"d", "x"}}, "next");
  EXPECT_EQ(write1(d, next), write_outcome::stored);
  EXPECT_EQ(live_rows(d), 1);
}

}  // namespace
}  // namespace waggle::pgtest
