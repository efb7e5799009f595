// The write path: duplicates, NIP-09 deletion, tenant isolation.
// (Replaceable and addressable heads: event_replace_test.cpp; bisection of
// poison events and the failure policy: batch_bisect_test.cpp.)

#include <latch>

#include "tests/db/write_fixture.hpp"

namespace waggle::pgtest {
namespace {

// ---- duplicates -------------------------------------------------------------------

TEST_F(WriteTest, SameEventTwiceIsStoredThenDuplicate) {
  auto c = community();
  auto ev = make_event(1, 1, 1000, {{"t", "hello"}, {"p", std::string(64, 'a')}}, "hi");
  EXPECT_EQ(write1(c, ev), write_outcome::stored);
  EXPECT_EQ(tag_rows(c, ev.id), 2);
  EXPECT_EQ(write1(c, ev), write_outcome::duplicate);
  EXPECT_EQ(all_rows(c), 1);
  EXPECT_EQ(tag_rows(c, ev.id), 2) << "a duplicate must not add tag rows";
}

TEST_F(WriteTest, SameEventTwiceInOneBatch) {
  auto c = community();
  auto ev = make_event(1, 1, 1000, {{"t", "x"}});
  auto r = write(c, {ev, ev});
  EXPECT_EQ(r[0].outcome, write_outcome::stored);
  EXPECT_EQ(r[1].outcome, write_outcome::duplicate);
  EXPECT_EQ(all_rows(c), 1);
  EXPECT_EQ(tag_rows(c, ev.id), 1);
}

TEST_F(WriteTest, RawJsonIsReturnedVerbatimIncludingNulInContent) {
  auto c = community();
  auto ev = make_event(1, 1, 1000, {{"t", "quote\"back\\slash"}},
                       std::string("nul:\0:unicode:\xc3\xa9:\"q\"\n", 21));
  ASSERT_NE(ev.raw.find("\\u0000"), std::string::npos) << ev.raw;
  EXPECT_EQ(write1(c, ev), write_outcome::stored);
  proto::filter f;
  f.ids = std::vector<std::string>{ev.id};
  auto got = query(c, f);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0], ev.raw);
  proto::filter by_tag;
  by_tag.tags['t'] = {"quote\"back\\slash"};
  EXPECT_EQ(query(c, by_tag), std::vector<std::string>{ev.raw});
}

TEST_F(WriteTest, EphemeralAndMalformedEventsAreRejectedWithoutStoring) {
  auto c = community();
  auto eph = make_event(1, 20001, 1000);
  auto bad = make_event(1, 1, 1000);
  bad.id = "not-hex";
  auto good = make_event(1, 1, 1001);
  auto r = write(c, {eph, bad, good});
  EXPECT_EQ(r[0].outcome, write_outcome::rejected);
  EXPECT_EQ(r[0].reason, "ephemeral events are not stored");
  EXPECT_EQ(r[1].outcome, write_outcome::rejected);
  EXPECT_EQ(r[2].outcome, write_outcome::stored);
  EXPECT_EQ(all_rows(c), 1);
}

TEST_F(WriteTest, LargeMixedBatchIsOneTransaction) {
  auto c = community("a");
  auto c2 = community("b");
  std::vector<proto::event> evs;
  std::vector<ingest_item> items;
  for (int i = 0; i < 300; ++i) {
    evs.push_back(make_event(50 + i % 7, 9, 1000 + i,
                             {{"g", "room" + std::to_string(i % 5)}, {"p", std::string(64, 'b')},
                              {"e", std::string(64, 'c'), "", "reply"}, {"t", "quote\"d,{x}"}},
                             "message " + std::to_string(i)));
  }
  for (int i = 0; i < 40; ++i)  // 10 coordinates, 4 versions each
    evs.push_back(make_event(60 + i % 10, 10002, 2000 + i, {}, "relays " + std::to_string(i)));
  for (int i = 0; i < 20; ++i)
    evs.push_back(make_event(70 + i % 4, 30023, 3000 + i, {{"d", "doc" + std::to_string(i % 8)}}));
  evs.push_back(make_event(50, 5, 5000, {{"e", evs[0].id}, {"e", evs[7].id}}));
  for (const auto& ev : evs)
    items.push_back({c, ptr(ev)});
  items.push_back({c2, ptr(evs[1])});
  auto r = db::write_batch(conn(), items);
  ASSERT_EQ(r.size(), items.size());
  int stored = 0, superseded = 0;
  for (const auto& x : r) {
    stored += x.outcome == write_outcome::stored;
    superseded += x.outcome == write_outcome::superseded;
  }
  // 300 + 10 + 8 heads + the deletion + the copy in c2.
  EXPECT_EQ(stored, 300 + 10 + 8 + 1 + 1);
  EXPECT_EQ(superseded, 30 + 12);
  EXPECT_FALSE(is_live(c, evs[0].id));
  EXPECT_FALSE(is_live(c, evs[7].id));
  EXPECT_EQ(live_rows(c), 300 - 2 + 10 + 8 + 1);
  pqxx::nontransaction tx(conn());
  // Every row of the batch, in both tables and both communities, carries the
  // same inserting transaction id.
  auto xids = tx.exec_params(
    "SELECT count(DISTINCT x) FROM (SELECT xmin::text AS x FROM events WHERE community_id IN ($1, $2) "
    "UNION ALL SELECT xmin::text FROM event_tags WHERE community_id IN ($1, $2)) s",
    c, c2)[0][0].as<int>();
  EXPECT_EQ(xids, 1);
  EXPECT_EQ(tx.exec_params("SELECT count(*) FROM event_tags WHERE community_id = $1 AND value = 'quote\"d,{x}'", c)[0][0]
              .as<int>(), 300);
}

// ---- NIP-09 deletion ----------------------------------------------------------------------

TEST_F(WriteTest, DeletionByETagDeletesOwnEventsOnly) {
  auto c = community();
  auto mine = make_event(20, 1, 1000, {}, "mine");
  auto theirs = make_event(21, 1, 1000, {}, "theirs");
  auto my_other_deletion = make_event(20, 5, 900, {{"e", std::string(64, '0')}});
  ASSERT_EQ(write(c, {mine, theirs, my_other_deletion}).size(), 3u);
  auto del = make_event(20, 5, 2000,
                        {{"e", mine.id}, {"e", theirs.id}, {"e", my_other_deletion.id}, {"e", "junk"}});
  EXPECT_EQ(write1(c, del), write_outcome::stored);
  EXPECT_FALSE(is_live(c, mine.id));
  EXPECT_TRUE(is_live(c, theirs.id)) << "another author's event must not be deleted";
  EXPECT_TRUE(is_live(c, my_other_deletion.id)) << "a deletion of a deletion has no effect";
  EXPECT_TRUE(is_live(c, del.id));

  proto::filter f;
  f.kinds = std::vector<int32_t>{1};
  EXPECT_EQ(query(c, f), std::vector<std::string>{theirs.raw});
  EXPECT_EQ(db::count_events(conn(), c, {f}, wall_now()), 1u);
  // Resent, it stays deleted.
  EXPECT_EQ(write1(c, mine), write_outcome::duplicate);
  EXPECT_FALSE(is_live(c, mine.id));
  EXPECT_EQ(query(c, f), std::vector<std::string>{theirs.raw});
}

TEST_F(WriteTest, DeletionInTheSameBatchAsItsTarget) {
  auto c = community();
  auto mine = make_event(22, 9, 1000, {{"g", "room"}});
  auto del = make_event(22, 5, 1001, {{"e", mine.id}});
  auto r = write(c, {del, mine});
  EXPECT_EQ(r[0].outcome, write_outcome::stored);
  EXPECT_EQ(r[1].outcome, write_outcome::stored);
  EXPECT_FALSE(is_live(c, mine.id));
}

TEST_F(WriteTest, EventArrivingAfterItsDeletionIsNotStoredLive) {
  auto c = community();
  auto mine = make_event(23, 1, 1000);
  auto del = make_event(23, 5, 2000, {{"e", mine.id}});
  EXPECT_EQ(write1(c, del), write_outcome::stored);
  EXPECT_EQ(write1(c, mine), write_outcome::superseded);
  EXPECT_FALSE(is_live(c, mine.id));
  // A deletion by someone else does not stop it.
  auto theirs = make_event(24, 1, 1000);
  auto not_theirs = make_event(23, 5, 2000, {{"e", theirs.id}});
  EXPECT_EQ(write1(c, not_theirs), write_outcome::stored);
  EXPECT_EQ(write1(c, theirs), write_outcome::stored);
  EXPECT_TRUE(is_live(c, theirs.id));
}

TEST_F(WriteTest, DeletionByATagDeletesVersionsUpToItsCreatedAt) {
  auto c = community();
  auto v1 = make_event(25, 30023, 1000, {{"d", "post"}}, "v1");
  auto other_d = make_event(25, 30023, 1000, {{"d", "other"}});
  ASSERT_EQ(write1(c, v1), write_outcome::stored);
  ASSERT_EQ(write1(c, other_d), write_outcome::stored);
  auto pk = v1.pubkey;
  auto del = make_event(25, 5, 1500, {{"a", "30023:" + pk + ":post"}});
  EXPECT_EQ(write1(c, del), write_outcome::stored);
  EXPECT_FALSE(is_live(c, v1.id));
  EXPECT_TRUE(is_live(c, other_d.id));
  // An older version arriving later is covered by the deletion.
  auto v0 = make_event(25, 30023, 1200, {{"d", "post"}}, "v0");
  EXPECT_EQ(write1(c, v0), write_outcome::superseded);
  EXPECT_EQ(live_rows(c, "kind = 30023 AND d_tag = 'post'"), 0);
  // A version newer than the deletion lives.
  auto v2 = make_event(25, 30023, 2000, {{"d", "post"}}, "v2");
  EXPECT_EQ(write1(c, v2), write_outcome::stored);
  EXPECT_TRUE(is_live(c, v2.id));
  // Deleting it again with an older deletion does nothing.
  auto late = make_event(25, 5, 1800, {{"a", "30023:" + pk + ":post"}});
  EXPECT_EQ(write1(c, late), write_outcome::stored);
  EXPECT_TRUE(is_live(c, v2.id));
}

TEST_F(WriteTest, DeletionByATagOfAnotherAuthorOrReplaceableKind) {
  auto c = community();
  auto theirs = make_event(26, 30023, 1000, {{"d", "post"}});
  auto profile = make_event(27, 0, 1000, {}, "profile");
  ASSERT_EQ(write(c, {theirs, profile}).size(), 2u);
  auto del_theirs = make_event(27, 5, 2000, {{"a", "30023:" + theirs.pubkey + ":post"}});
  EXPECT_EQ(write1(c, del_theirs), write_outcome::stored);
  EXPECT_TRUE(is_live(c, theirs.id)) << "an `a` tag naming another author deletes nothing";
  auto del_profile = make_event(27, 5, 2000, {{"a", "0:" + profile.pubkey + ":"}});
  EXPECT_EQ(write1(c, del_profile), write_outcome::stored);
  EXPECT_FALSE(is_live(c, profile.id));
}

// ---- tenants -----------------------------------------------------------------------------

TEST_F(WriteTest, SameEventInTwoCommunitiesIsTwoRowsAndStaysApart) {
  auto a = community("a");
  auto b = community("b");
  auto shared = make_event(30, 9, 1000, {{"g", "general"}}, "in both");
  auto only_b = make_event(30, 9, 1001, {{"g", "general"}}, "only in b");
  EXPECT_EQ(write1(a, shared), write_outcome::stored);
  EXPECT_EQ(write1(b, shared), write_outcome::stored) << "dedup is per community";
  EXPECT_EQ(write1(b, only_b), write_outcome::stored);
  EXPECT_EQ(all_rows(a), 1);
  EXPECT_EQ(all_rows(b), 2);

  proto::filter all;
  proto::filter by_tag;
  by_tag.tags['g'] = {"general"};
  proto::filter by_author;
  by_author.authors = std::vector<std::string>{shared.pubkey};
  proto::filter by_id;
  by_id.ids = std::vector<std::string>{only_b.id};
  proto::filter by_kind;
  by_kind.kinds = std::vector<int32_t>{9};
  for (const auto& f : {all, by_tag, by_author, by_kind})
    EXPECT_EQ(query(a, f), std::vector<std::string>{shared.raw}) << proto::to_json(f);
  EXPECT_TRUE(query(a, by_id).empty());
  EXPECT_EQ(db::count_events(conn(), a, {all, by_tag, by_author, by_id, by_kind}, wall_now()), 1u);
  EXPECT_EQ(db::count_events(conn(), b, {by_tag}, wall_now()), 2u);

  // A deletion in b does not reach a.
  auto del = make_event(30, 5, 2000, {{"e", shared.id}});
  EXPECT_EQ(write1(b, del), write_outcome::stored);
  EXPECT_TRUE(is_live(a, shared.id));
  EXPECT_FALSE(is_live(b, shared.id));
}

}  // namespace
}  // namespace waggle::pgtest
