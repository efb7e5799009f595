// Operator listeners, the db layer (docs/delivery.md, "Outbox"): mention rows
// written in the event's transaction and their NOTIFY, registrations, and the
// claims and fenced completions of the delivery supervisor.

#include <algorithm>
#include <thread>

#include <pqxx/notification>

#include "db/membership_store.hpp"
#include "db/operator_outbox.hpp"
#include "tests/db/write_fixture.hpp"

namespace waggle::pgtest {
namespace {

using namespace std::chrono_literals;

const std::string target1(64, 'a');
const std::string target2(64, 'b');

// Collects what a LISTENing connection receives on the wake channel.
class wake_listener : public pqxx::notification_receiver {
 public:
  explicit wake_listener(pqxx::connection_base& c)
    : pqxx::notification_receiver(c, db::delivery_wake_channel) {}
  void operator()(const std::string& payload, int) override { payloads.push_back(payload); }
  std::vector<std::string> payloads;
};

// A key no other test of this process uses: claims select by listener, and
// the tests of one binary share a database.
std::string fresh_listener() {
  static int n = 0;
  char buf[65];
  std::snprintf(buf, sizeof buf, "%064x", ++n);
  return buf;
}

class OutboxTest : public WriteTest {
 protected:
  const std::string listener1 = fresh_listener();
  const std::string listener2 = fresh_listener();

  void register_targets(int64_t c, const std::string& listener,
                        const std::vector<std::string>& targets) {
    db::register_listener_targets(conn(), c, listener, targets);
  }
  int64_t outbox_rows(int64_t c, const std::string& extra_where = "TRUE") {
    pqxx::nontransaction tx(conn());
    return tx.exec_params("SELECT count(*) FROM operator_listener_outbox WHERE community_id = $1 "
                          "AND " + extra_where, c)[0][0].as<int64_t>();
  }
  // Rows of (listener, target) for one event.
  int64_t rows_of(int64_t c, const std::string& listener, const std::string& target,
                  const std::string& event_id) {
    pqxx::nontransaction tx(conn());
    return tx.exec_params("SELECT count(*) FROM operator_listener_outbox WHERE community_id = $1 "
                          "AND listener_pubkey = decode($2, 'hex') AND target_pubkey = "
                          "decode($3, 'hex') AND event_id = decode($4, 'hex')",
                          c, listener, target, event_id)[0][0].as<int64_t>();
  }
  void sql(const std::string& text) {
    pqxx::nontransaction tx(conn());
    tx.exec(text);
  }
  // Sends a marker NOTIFY from another session and returns every payload the
  // listener received before it. Notifications arrive in commit order, so
  // once the marker is in, anything committed before it is in too: no wait
  // for something that should not come.
  std::vector<std::string> before_marker(pqxx::connection& lc, wake_listener& w) {
    sql(std::string("NOTIFY ") + db::delivery_wake_channel + ", 'marker'");
    auto until = std::chrono::steady_clock::now() + 10s;
    while (std::find(w.payloads.begin(), w.payloads.end(), "marker") == w.payloads.end() &&
           std::chrono::steady_clock::now() < until)
      lc.await_notification(0, 100000);
    auto at = std::find(w.payloads.begin(), w.payloads.end(), "marker");
    EXPECT_NE(at, w.payloads.end()) << "the marker never arrived";
    std::vector<std::string> before(w.payloads.begin(), at);
    w.payloads.clear();
    return before;
  }
  // Writes `n` mention events of target1 (kind 9) and returns them.
  std::vector<proto::event> seed(int64_t c, int n, int64_t created_at = 1000) {
    std::vector<proto::event> evs;
    for (int i = 0; i < n; ++i)
      evs.push_back(make_event(1, 9, created_at + i, {{"p", target1}}, "hi " + std::to_string(i)));
    for (const auto& r : write(c, evs))
      EXPECT_EQ(r.outcome, write_outcome::stored);
    return evs;
  }
};

proto::event mention(int64_t created_at, std::vector<proto::tag> tags, int32_t kind = 9) {
  return make_event(1, kind, created_at, std::move(tags), "mention");
}

// ---- the outbox, in the event's transaction --------------------------------------

TEST_F(OutboxTest, CommittedMentionAddsOneRowPerListenerAndWakes) {
  auto c = community();
  register_targets(c, listener1, {target1});
  register_targets(c, listener2, {target1, target2});
  auto lc = connect();
  wake_listener w(*lc);
  auto ev = mention(1000, {{"p", target1}, {"p", target2}});
  EXPECT_EQ(write1(c, ev), write_outcome::stored);
  EXPECT_EQ(outbox_rows(c), 3);
  EXPECT_EQ(rows_of(c, listener1, target1, ev.id), 1);
  EXPECT_EQ(rows_of(c, listener2, target1, ev.id), 1);
  EXPECT_EQ(rows_of(c, listener2, target2, ev.id), 1);
  EXPECT_EQ(before_marker(*lc, w), std::vector<std::string>{""}) << "one wake, empty payload";
}

TEST_F(OutboxTest, RolledBackMentionAddsNoRowAndWakesNobody) {
  auto c = community();
  register_targets(c, listener1, {target1});
  auto lc = connect();
  wake_listener w(*lc);
  auto ev = mention(1000, {{"p", target1}});
  {
    pqxx::work tx(conn());
    auto r = db::write_events(tx, batch(c, {ev}));
    EXPECT_EQ(r.at(0).outcome, write_outcome::stored);
    EXPECT_EQ(tx.exec_params("SELECT count(*) FROM operator_listener_outbox WHERE community_id = $1",
                             c)[0][0].as<int>(), 1) << "written in the event's transaction";
    tx.abort();
  }
  EXPECT_EQ(outbox_rows(c), 0);
  EXPECT_TRUE(before_marker(*lc, w).empty());
}

TEST_F(OutboxTest, BatchWithoutNewRowsSendsNoNotify) {
  auto c = community();
  register_targets(c, listener1, {target1});
  auto lc = connect();
  wake_listener w(*lc);
  // A mention of an unregistered target runs the statement and adds nothing;
  // the others run no statement at all.
  auto r = write(c, {mention(1000, {{"p", target2}}), mention(1001, {}),
                     mention(1002, {{"p", target1}}, 1)});
  for (const auto& x : r)
    EXPECT_EQ(x.outcome, write_outcome::stored);
  EXPECT_EQ(outbox_rows(c), 0);
  EXPECT_TRUE(before_marker(*lc, w).empty());
}

TEST_F(OutboxTest, DuplicateEventAddsNothingEvenAfterItsRowWasDelivered) {
  auto c = community();
  register_targets(c, listener1, {target1});
  auto ev = mention(1000, {{"p", target1}});
  EXPECT_EQ(write1(c, ev), write_outcome::stored);
  auto claimed = db::claim_deliveries(conn(), {listener1}, 10);
  ASSERT_EQ(claimed.size(), 1u);
  EXPECT_EQ(db::complete_delivery(conn(), claimed[0], db::completion::delivered, 0ms),
            db::completion_result::done);
  EXPECT_EQ(outbox_rows(c), 0);
  auto lc = connect();
  wake_listener w(*lc);
  auto again = write(c, {ev, ev});
  EXPECT_EQ(again[0].outcome, write_outcome::duplicate);
  EXPECT_EQ(again[1].outcome, write_outcome::duplicate);
  EXPECT_EQ(outbox_rows(c), 0) << "a resent event must not be delivered twice";
  EXPECT_TRUE(before_marker(*lc, w).empty());
}

// The other duplicate: a concurrent batch inserts the event first, and this
// batch's insert skips it (S3's ON CONFLICT, after S1 saw nothing). The first
// batch removes its own row before committing (as if already delivered), so
// only the "inserted by this batch" rule keeps the second from adding one.
TEST_F(OutboxTest, EventInsertedFirstByAConcurrentBatchAddsNothing) {
  auto c = community();
  register_targets(c, listener1, {target1});
  auto ev = mention(1000, {{"p", target1}});
  auto a = connect();
  auto b = connect();
  int b_pid = b->backendpid();
  pqxx::work ta(*a);
  EXPECT_EQ(db::write_events(ta, batch(c, {ev})).at(0).outcome, write_outcome::stored);
  ta.exec("DELETE FROM operator_listener_outbox WHERE community_id = " + std::to_string(c));
  std::vector<write_result> rb;
  std::thread tb([&] { rb = db::write_batch(*b, batch(c, {ev})); });
  auto observer = connect();
  EXPECT_TRUE(eventually([&] {
    pqxx::nontransaction tx(*observer);
    return !tx.exec_params("SELECT 1 FROM pg_stat_activity WHERE pid = $1 AND wait_event_type = "
                           "'Lock'", b_pid).empty();
  })) << "b never waited for a's insert";
  ta.commit();
  tb.join();
  ASSERT_EQ(rb.size(), 1u);
  EXPECT_EQ(rb[0].outcome, write_outcome::duplicate);
  EXPECT_EQ(outbox_rows(c), 0);
}

TEST_F(OutboxTest, OnlyTheFourKindsWake) {
  auto c = community();
  register_targets(c, listener1, {target1});
  std::vector<proto::event> evs;
  for (int32_t kind : {1, 7, 9, 1111, 40001, 40002, 45001, 45002, 45003, 45004})
    evs.push_back(mention(1000 + kind, {{"p", target1}}, kind));
  for (const auto& r : write(c, evs))
    EXPECT_EQ(r.outcome, write_outcome::stored);
  EXPECT_EQ(outbox_rows(c), 4);
  EXPECT_EQ(outbox_rows(c, "event_kind IN (9, 40002, 45001, 45003)"), 4);
  EXPECT_TRUE(db::wakes_listeners(9) && db::wakes_listeners(40002) && db::wakes_listeners(45001) &&
              db::wakes_listeners(45003));
  EXPECT_FALSE(db::wakes_listeners(1) || db::wakes_listeners(45002) || db::wakes_listeners(9000));
}

TEST_F(OutboxTest, OnlyLowercase64HexPValuesNameTargets) {
  auto c = community();
  register_targets(c, listener1, {target1});
  std::string upper(64, 'A');
  std::string short_key = target1.substr(0, 62);
  std::string not_hex = std::string(63, 'a') + "g";
  // Alone, none of these names a target (and "g" must not reach decode()).
  auto bad = mention(1000, {{"p", upper}, {"p", short_key}, {"p", not_hex}, {"p"}, {"P", target1}});
  auto lc = connect();
  wake_listener w(*lc);
  EXPECT_EQ(write1(c, bad), write_outcome::stored);
  EXPECT_EQ(outbox_rows(c), 0);
  EXPECT_TRUE(before_marker(*lc, w).empty());
  // Next to a good one, the good one still counts.
  auto mixed = mention(1001, {{"p", not_hex}, {"p", target1}});
  EXPECT_EQ(write1(c, mixed), write_outcome::stored);
  EXPECT_EQ(outbox_rows(c), 1);
}

TEST_F(OutboxTest, RepeatedPTagsCountOnce) {
  auto c = community();
  register_targets(c, listener1, {target1});
  register_targets(c, listener2, {target1});
  auto ev = mention(1000, {{"p", target1}, {"p", target1, "wss://relay.example"}, {"p", target1}});
  EXPECT_EQ(write1(c, ev), write_outcome::stored);
  EXPECT_EQ(rows_of(c, listener1, target1, ev.id), 1);
  EXPECT_EQ(rows_of(c, listener2, target1, ev.id), 1);
  EXPECT_EQ(outbox_rows(c), 2);
}

TEST_F(OutboxTest, RegistrationsAreScopedToTheirCommunity) {
  auto c = community("a");
  auto other = community("b");
  register_targets(other, listener1, {target1});
  EXPECT_EQ(write1(c, mention(1000, {{"p", target1}})), write_outcome::stored);
  EXPECT_EQ(outbox_rows(c), 0);
  EXPECT_EQ(outbox_rows(other), 0);
}

// One statement per batch whatever its size, counted by a statement-level
// trigger (it fires once per INSERT statement, rows or not).
TEST_F(OutboxTest, FiveHundredMentionsAreOneStatement) {
  auto c = community();
  register_targets(c, listener1, {target1});
  register_targets(c, listener2, {target1});
  sql("CREATE TABLE test_outbox_statements (n int)");
  sql("CREATE FUNCTION test_count_outbox_statement() RETURNS trigger LANGUAGE plpgsql AS "
      "$$ BEGIN INSERT INTO test_outbox_statements VALUES (1); RETURN NULL; END $$");
  sql("CREATE TRIGGER test_outbox_statements AFTER INSERT ON operator_listener_outbox "
      "FOR EACH STATEMENT EXECUTE FUNCTION test_count_outbox_statement()");
  auto statements = [&] {
    pqxx::nontransaction tx(conn());
    return tx.exec("SELECT count(*) FROM test_outbox_statements")[0][0].as<int>();
  };
  auto lc = connect();
  wake_listener w(*lc);
  seed(c, 500);
  EXPECT_EQ(outbox_rows(c), 1000);
  EXPECT_EQ(statements(), 1);
  std::vector<proto::event> plain;
  for (int i = 0; i < 50; ++i)
    plain.push_back(mention(5000 + i, {{"p", target1}}, 1));
  write(c, plain);
  EXPECT_EQ(statements(), 1) << "a batch without a candidate mention runs no outbox statement";
  sql("DROP TRIGGER test_outbox_statements ON operator_listener_outbox");
  sql("DROP FUNCTION test_count_outbox_statement()");
  sql("DROP TABLE test_outbox_statements");
  EXPECT_EQ(before_marker(*lc, w), std::vector<std::string>{""});
}

// ---- registrations ------------------------------------------------------------------

TEST_F(OutboxTest, RegistrationsListRenewAndReap) {
  auto c = community();
  EXPECT_EQ(db::register_listener_targets(conn(), c, listener1, {target2, target1, target1}), 2u);
  db::register_listener_targets(conn(), c, listener2, {target1});
  auto listed = db::list_listener_targets(conn(), c, listener1);
  ASSERT_EQ(listed.size(), 2u);
  EXPECT_EQ(listed[0].target, target1);
  EXPECT_EQ(listed[1].target, target2);
  EXPECT_NEAR(listed[0].registered_at, wall_now(), 60);

  sql("UPDATE operator_listener_pubkeys SET created_at = now() - interval '31 days' "
      "WHERE community_id = " + std::to_string(c));
  db::register_listener_targets(conn(), c, listener1, {target1});  // renews target1 only
  listed = db::list_listener_targets(conn(), c, listener1);
  ASSERT_EQ(listed.size(), 2u);
  EXPECT_NEAR(listed[0].registered_at, wall_now(), 60) << "renewed";
  EXPECT_LT(listed[1].registered_at, wall_now() - 30 * 86400);

  EXPECT_EQ(db::reap_listener_registrations(conn(), std::chrono::hours(24 * 30)), 2u);
  listed = db::list_listener_targets(conn(), c, listener1);
  ASSERT_EQ(listed.size(), 1u);
  EXPECT_EQ(listed[0].target, target1);
  EXPECT_TRUE(db::list_listener_targets(conn(), c, listener2).empty());
  EXPECT_THROW(db::register_listener_targets(conn(), c, listener1, {std::string(64, 'A')}),
               std::invalid_argument);
}

// The cap counts what the listener holds in the community with what it adds;
// renewing keys it holds adds nothing; over the cap nothing is written.
TEST_F(OutboxTest, RegistrationsStopAtTheCapWithNothingWritten) {
  auto c = community();
  const std::string t3(64, 'c'), t4(64, 'd');
  EXPECT_EQ(db::register_listener_targets(conn(), c, listener1, {target1, target2}, 3), 2u);
  EXPECT_EQ(db::register_listener_targets(conn(), c, listener1, {target1, target2, t3}, 3), 3u);
  EXPECT_FALSE(db::register_listener_targets(conn(), c, listener1, {t3, t4}, 3));
  EXPECT_EQ(db::list_listener_targets(conn(), c, listener1).size(), 3u);
  EXPECT_EQ(db::register_listener_targets(conn(), c, listener2, {t4}, 3), 1u);  // per listener
}

// ---- claims and completions -------------------------------------------------------------

TEST_F(OutboxTest, ClaimReturnsWhatADeliveryNeeds) {
  auto c = community();
  register_targets(c, listener1, {target1});
  auto evs = seed(c, 1);
  auto claimed = db::claim_deliveries(conn(), {listener1}, 10);
  ASSERT_EQ(claimed.size(), 1u);
  const auto& d = claimed[0];
  EXPECT_EQ(d.listener, listener1);
  EXPECT_EQ(d.target, target1);
  EXPECT_EQ(d.community_id, c);
  EXPECT_NE(d.community_host.find(".test"), std::string::npos);
  EXPECT_EQ(d.event_raw, evs[0].raw);
  EXPECT_EQ(d.attempts, 1);
  EXPECT_EQ(d.delivery_id.size(), 36u);
  EXPECT_EQ(d.claim_id.size(), 36u);
  EXPECT_NEAR(d.created_at, wall_now(), 60);
  EXPECT_EQ(outbox_rows(c, "state = 'sending'"), 1);
  EXPECT_TRUE(db::claim_deliveries(conn(), {listener1}, 10).empty()) << "leased";
}

// Claimer A holds its claim transaction open; B must skip A's row, not wait
// for it (lock_timeout turns a wait into a failure) and not take it.
TEST_F(OutboxTest, ConcurrentClaimersNeverGetTheSameRow) {
  auto c = community();
  register_targets(c, listener1, {target1});
  seed(c, 3);
  auto a = connect();
  auto b = connect();
  pqxx::nontransaction(*b).exec("SET lock_timeout = '2s'");
  pqxx::work ta(*a);
  auto got_a = db::claim_deliveries(ta, {listener1}, 1);
  ASSERT_EQ(got_a.size(), 1u);
  auto got_b = db::claim_deliveries(*b, {listener1}, 10);
  ta.commit();
  ASSERT_EQ(got_b.size(), 2u);
  for (const auto& r : got_b)
    EXPECT_NE(r.id, got_a[0].id);
  EXPECT_EQ(outbox_rows(c, "state = 'sending'"), 3);
}

TEST_F(OutboxTest, ExpiredClaimIsReclaimedAndTheOldClaimIsFenced) {
  auto c = community();
  register_targets(c, listener1, {target1});
  seed(c, 1);
  db::claim_settings expired;
  expired.lease = 0s;
  auto first = db::claim_deliveries(conn(), {listener1}, 10, expired);
  ASSERT_EQ(first.size(), 1u);
  auto second = db::claim_deliveries(conn(), {listener1}, 10);
  ASSERT_EQ(second.size(), 1u);
  EXPECT_EQ(second[0].id, first[0].id);
  EXPECT_EQ(second[0].delivery_id, first[0].delivery_id) << "stable across retries";
  EXPECT_NE(second[0].claim_id, first[0].claim_id);
  EXPECT_EQ(second[0].attempts, 2);
  for (auto how : {db::completion::delivered, db::completion::retry, db::completion::terminal})
    EXPECT_EQ(db::complete_delivery(conn(), first[0], how, 0ms), db::completion_result::fenced);
  EXPECT_EQ(outbox_rows(c, "state = 'sending' AND claim_id = '" + second[0].claim_id +
                             "' AND attempts = 2 AND lease_until > now()"), 1)
    << "a fenced completion changes nothing";
  EXPECT_EQ(db::complete_delivery(conn(), second[0], db::completion::delivered, 0ms),
            db::completion_result::done);
  EXPECT_EQ(outbox_rows(c), 0);
}

TEST_F(OutboxTest, RetryIsNotClaimableBeforeItsTime) {
  auto c = community();
  register_targets(c, listener1, {target1});
  seed(c, 1);
  auto first = db::claim_deliveries(conn(), {listener1}, 10);
  ASSERT_EQ(first.size(), 1u);
  EXPECT_EQ(db::complete_delivery(conn(), first[0], db::completion::retry, 3600s),
            db::completion_result::done);
  EXPECT_EQ(outbox_rows(c, "state = 'pending' AND claim_id IS NULL AND "
                           "next_attempt_at > now() + interval '3590 seconds'"), 1);
  EXPECT_TRUE(db::claim_deliveries(conn(), {listener1}, 10).empty());
  EXPECT_EQ(db::complete_delivery(conn(), first[0], db::completion::delivered, 0ms),
            db::completion_result::fenced) << "a pending row has no claim to complete";
  sql("UPDATE operator_listener_outbox SET next_attempt_at = now() - interval '1 second' "
      "WHERE community_id = " + std::to_string(c));
  auto again = db::claim_deliveries(conn(), {listener1}, 10);
  ASSERT_EQ(again.size(), 1u);
  EXPECT_EQ(again[0].attempts, 2);
}

TEST_F(OutboxTest, MaxAttemptsDrops) {
  auto c = community();
  register_targets(c, listener1, {target1});
  seed(c, 1);
  db::claim_settings s;
  s.max_attempts = 2;
  s.lease = 0s;
  auto one = db::claim_deliveries(conn(), {listener1}, 10, s);
  ASSERT_EQ(one.size(), 1u);
  EXPECT_EQ(db::complete_delivery(conn(), one[0], db::completion::retry, 0ms, s),
            db::completion_result::done);
  auto two = db::claim_deliveries(conn(), {listener1}, 10, s);
  ASSERT_EQ(two.size(), 1u);
  EXPECT_EQ(two[0].attempts, 2);
  EXPECT_TRUE(db::claim_deliveries(conn(), {listener1}, 10, s).empty())
    << "an expired claim at max_attempts is not claimed again";
  EXPECT_EQ(db::complete_delivery(conn(), two[0], db::completion::retry, 0ms, s),
            db::completion_result::dropped);
  EXPECT_EQ(outbox_rows(c), 0);
}

TEST_F(OutboxTest, RowsPastTheRetentionAreNotClaimedAndAreReaped) {
  auto c = community();
  register_targets(c, listener1, {target1});
  seed(c, 2);
  auto claimed = db::claim_deliveries(conn(), {listener1}, 1);
  ASSERT_EQ(claimed.size(), 1u);
  sql("UPDATE operator_listener_outbox SET created_at = now() - interval '16 minutes' "
      "WHERE community_id = " + std::to_string(c));
  EXPECT_TRUE(db::claim_deliveries(conn(), {listener1}, 10).empty());
  EXPECT_EQ(db::complete_delivery(conn(), claimed[0], db::completion::retry, 0ms),
            db::completion_result::dropped);
  EXPECT_EQ(outbox_rows(c), 1);
  EXPECT_EQ(db::reap_outbox(conn(), 900s), 1u);
  EXPECT_EQ(outbox_rows(c), 0);
}

TEST_F(OutboxTest, RowsOfOtherListenersAreNotClaimed) {
  auto c = community();
  register_targets(c, listener1, {target1});
  register_targets(c, listener2, {target1});
  seed(c, 2);
  auto mine = db::claim_deliveries(conn(), {listener1}, 10);
  ASSERT_EQ(mine.size(), 2u);
  for (const auto& r : mine)
    EXPECT_EQ(r.listener, listener1);
  EXPECT_EQ(outbox_rows(c, "state = 'pending' AND listener_pubkey = decode('" + listener2 +
                             "', 'hex')"), 2);
  EXPECT_EQ(db::claim_deliveries(conn(), {listener2, listener1}, 10).size(), 2u);
}

TEST_F(OutboxTest, RowsOfDeletedEventsAreRemovedOnClaim) {
  auto c = community();
  register_targets(c, listener1, {target1});
  auto evs = seed(c, 3);
  // NIP-09 by its author, a soft delete; and a row gone altogether (reaped).
  EXPECT_EQ(write1(c, make_event(1, 5, 2000, {{"e", evs[0].id}})), write_outcome::stored);
  EXPECT_FALSE(is_live(c, evs[0].id));
  sql("DELETE FROM events WHERE community_id = " + std::to_string(c) + " AND id = decode('" +
      evs[1].id + "', 'hex')");
  auto claimed = db::claim_deliveries(conn(), {listener1}, 10);
  ASSERT_EQ(claimed.size(), 1u);
  EXPECT_EQ(claimed[0].event_raw, evs[2].raw);
  EXPECT_EQ(outbox_rows(c), 1);
}

TEST_F(OutboxTest, OutboxStateForTheGauge) {
  auto c = community();
  register_targets(c, listener1, {target1});
  EXPECT_EQ(db::read_outbox_state(conn(), {listener1}).rows, 0u);
  EXPECT_FALSE(db::read_outbox_state(conn(), {listener1}).next_due_in_seconds);
  seed(c, 2);
  sql("UPDATE operator_listener_outbox SET created_at = now() - interval '60 seconds' "
      "WHERE community_id = " + std::to_string(c));
  auto claimed = db::claim_deliveries(conn(), {listener1}, 1);
  ASSERT_EQ(claimed.size(), 1u);
  auto st = db::read_outbox_state(conn(), {listener1});
  EXPECT_EQ(st.rows, 2u);
  EXPECT_NEAR(st.oldest_age_seconds, 60, 10);
  ASSERT_TRUE(st.next_due_in_seconds);
  EXPECT_LE(*st.next_due_in_seconds, 0.5);
  EXPECT_EQ(db::read_outbox_state(conn(), {listener2}).rows, 0u);
}

// A listener that may no longer read the community (removed from a closed
// one, or banned from an open one) is sent none of its events: the claim
// deletes those rows instead.
TEST_F(OutboxTest, ClaimsSkipListenersThatLostAccess) {
  auto closed = community("closed");
  sql("UPDATE communities SET policy = 'closed' WHERE id = " + std::to_string(closed));
  ASSERT_TRUE(db::add_member(conn(), closed, listener1, member_role::member, ""));
  ASSERT_TRUE(db::add_member(conn(), closed, listener2, member_role::member, ""));
  ASSERT_TRUE(db::add_member(conn(), closed, make_event(1, 1, 1, {}, "").pubkey,
                             member_role::member, ""));  // the author of seed()
  register_targets(closed, listener1, {target1});
  register_targets(closed, listener2, {target1});
  seed(closed, 1);
  ASSERT_EQ(outbox_rows(closed), 2);
  sql("UPDATE community_members SET removed_at = now() WHERE community_id = " +
      std::to_string(closed) + " AND pubkey = decode('" + listener2 + "', 'hex')");
  EXPECT_TRUE(db::claim_deliveries(conn(), {listener2}, 10).empty());
  EXPECT_EQ(outbox_rows(closed), 1);
  EXPECT_EQ(db::claim_deliveries(conn(), {listener1}, 10).size(), 1u);

  auto open = community("open");
  register_targets(open, listener1, {target2});
  write(open, {make_event(1, 9, 5000, {{"p", target2}}, "to the banned one")});
  sql("INSERT INTO community_banned_pubkeys (community_id, pubkey) VALUES (" +
      std::to_string(open) + ", decode('" + listener1 + "', 'hex'))");
  EXPECT_TRUE(db::claim_deliveries(conn(), {listener1}, 10).empty());
  EXPECT_EQ(outbox_rows(open), 0);
}

// Rows no claim can take (past the retention, or out of attempts) are never
// "due": the supervisor arms its next claim from this, and would claim in a
// loop until the reaper took them.
TEST_F(OutboxTest, RowsNoClaimCanTakeAreNeverDue) {
  auto c = community();
  register_targets(c, listener1, {target1});
  seed(c, 2);
  const auto in_c = " WHERE community_id = " + std::to_string(c);
  sql("UPDATE operator_listener_outbox SET created_at = now() - interval '20 minutes'" + in_c +
      " AND id = (SELECT min(id) FROM operator_listener_outbox" + in_c + ")");
  sql("UPDATE operator_listener_outbox SET attempts = 9" + in_c +
      " AND id = (SELECT max(id) FROM operator_listener_outbox" + in_c + ")");
  EXPECT_TRUE(db::claim_deliveries(conn(), {listener1}, 10).empty());
  auto st = db::read_outbox_state(conn(), {listener1});
  EXPECT_EQ(st.rows, 2u);
  EXPECT_FALSE(st.next_due_in_seconds) << *st.next_due_in_seconds;
}

// Red-team D0: a mention posted in a private channel reaches only a listener
// that could read the channel itself (an active member); registering the
// channel's members as targets gives a community member who is not in the
// channel nothing (no row is written for it, and a row written before it
// left is deleted at claim time). Open channels reach every listener that may read the
// community; a deleted channel's mentions reach nobody.
TEST_F(OutboxTest, PrivateChannelMentionsReachOnlyListenersInTheChannel) {
  auto c = community();
  const auto author = make_event(1, 1, 1, {}, "").pubkey;
  const auto cid = std::to_string(c);
  auto channel = [&](const std::string& id, const std::string& visibility) {
    sql("INSERT INTO channels (community_id, id, visibility, created_by) VALUES (" + cid + ", '" +
        id + "', '" + visibility + "', decode('" + author + "', 'hex'))");
    sql("INSERT INTO channel_members (community_id, channel_id, pubkey, role, added_by) VALUES (" +
        cid + ", '" + id + "', decode('" + author + "', 'hex'), 'owner', decode('" + author +
        "', 'hex'))");
  };
  channel("secret", "private");
  channel("lobby", "open");
  channel("gone", "open");
  sql("INSERT INTO channel_members (community_id, channel_id, pubkey, role, added_by) VALUES (" +
      cid + ", 'secret', decode('" + listener2 + "', 'hex'), 'bot', decode('" + author +
      "', 'hex'))");
  register_targets(c, listener1, {target1});
  register_targets(c, listener2, {target1});
  auto in = [&](const std::string& ch, int64_t at) {
    auto ev = make_event(1, 9, at, {{"h", ch}, {"p", target1}}, "in " + ch);
    EXPECT_EQ(write1(c, ev), write_outcome::stored) << ch;
    return ev;
  };
  auto secret = in("secret", 1000);
  in("lobby", 1001);
  in("gone", 1002);
  EXPECT_EQ(rows_of(c, listener1, target1, secret.id), 0) << "not even written for listener1";
  ASSERT_EQ(outbox_rows(c), 5);
  sql("UPDATE channels SET deleted_at = now() WHERE community_id = " + cid + " AND id = 'gone'");

  auto channels_of = [&](const std::vector<db::claimed_delivery>& rows) {
    std::vector<std::string> out;
    for (const auto& r : rows)
      out.push_back(r.event_raw.find("in secret") != std::string::npos  ? "secret"
                    : r.event_raw.find("in lobby") != std::string::npos ? "lobby"
                                                                        : "gone");
    std::sort(out.begin(), out.end());
    return out;
  };
  EXPECT_EQ(channels_of(db::claim_deliveries(conn(), {listener1}, 10)),
            std::vector<std::string>{"lobby"});
  EXPECT_EQ(channels_of(db::claim_deliveries(conn(), {listener2}, 10)),
            (std::vector<std::string>{"lobby", "secret"}));
  EXPECT_EQ(outbox_rows(c), 3) << "the deleted channel's two rows are deleted, never sent";

  // Removed from the channel after the row was written: not sent either.
  auto later = in("secret", 1003);
  sql("UPDATE channel_members SET removed_at = now(), removed_by = decode('" + author +
      "', 'hex') WHERE community_id = " + cid + " AND channel_id = 'secret' AND pubkey = decode('" +
      listener2 + "', 'hex')");
  EXPECT_TRUE(db::claim_deliveries(conn(), {listener2}, 10).empty());
  EXPECT_EQ(rows_of(c, listener2, target1, later.id), 0);
}

// Red-team D1: claims take listeners in turns (every listener's oldest due
// row, then every listener's second, ...) and never more of one listener's
// than its room, so one listener's backlog cannot fill every free slot.
TEST_F(OutboxTest, ClaimsTakeListenersInTurnsWithinTheirRoom) {
  using rooms = std::vector<db::listener_room>;
  auto c = community();
  register_targets(c, listener1, {target1});
  register_targets(c, listener2, {target2});
  std::vector<proto::event> evs;
  for (int i = 0; i < 10; ++i)  // listener1's backlog, due first
    evs.push_back(make_event(1, 9, 1000 + i, {{"p", target1}}, "one " + std::to_string(i)));
  for (int i = 0; i < 3; ++i)
    evs.push_back(make_event(1, 9, 2000 + i, {{"p", target2}}, "two " + std::to_string(i)));
  for (size_t i = 0; i < evs.size(); ++i)  // one batch each, so listener1's rows are due first
    ASSERT_EQ(write1(c, evs[i]), write_outcome::stored);
  auto count_of = [](const std::vector<db::claimed_delivery>& rows, const std::string& l) {
    return std::count_if(rows.begin(), rows.end(),
                         [&](const db::claimed_delivery& r) { return r.listener == l; });
  };
  pqxx::work tx(conn());
  auto first = db::claim_deliveries(tx, rooms{{listener1, 4}, {listener2, 4}}, 4);
  EXPECT_EQ(count_of(first, listener1), 2) << "in turns, not the four due first";
  EXPECT_EQ(count_of(first, listener2), 2);
  tx.abort();

  pqxx::work tx2(conn());
  auto roomy = db::claim_deliveries(tx2, rooms{{listener1, 1}, {listener2, 4}}, 4);
  EXPECT_EQ(count_of(roomy, listener1), 1) << "listener1 has room for one";
  EXPECT_EQ(count_of(roomy, listener2), 3);
  auto none = db::claim_deliveries(tx2, rooms{{listener1, 0}}, 4);
  EXPECT_TRUE(none.empty()) << "no room, no claim";
  tx2.abort();

  // The due reading for the next claim counts only listeners with room.
  const std::vector<std::string> only2{listener2};
  auto st = db::read_outbox_state(conn(), {listener1, listener2}, {}, &only2);
  ASSERT_TRUE(st.next_due_in_seconds);
  db::claim_deliveries(conn(), rooms{{listener2, 4}}, 4);
  st = db::read_outbox_state(conn(), {listener1, listener2}, {}, &only2);
  ASSERT_TRUE(st.next_due_in_seconds);
  EXPECT_GT(*st.next_due_in_seconds, 20.0)
    << "only listener2's leases count; listener1's due rows do not arm a claim it has no room for";
  EXPECT_EQ(st.rows, 13u);
}

// Red-team D1: one event names at most max_deliveries_per_event registered
// targets' listeners; the first ones in tag order.
TEST_F(OutboxTest, OneEventMakesAtMostTheCapOfDeliveriesInTagOrder) {
  auto c = community();
  std::vector<std::string> targets;
  std::vector<proto::tag> tags;
  for (int i = 0; i < 40; ++i) {
    char buf[65];
    std::snprintf(buf, sizeof buf, "%064x", 0xbeef00 + (39 - i));  // descending: tag order != key order
    targets.push_back(buf);
    tags.push_back({"p", buf});
  }
  register_targets(c, listener1, targets);
  auto ev = mention(1000, tags);
  ASSERT_EQ(write1(c, ev), write_outcome::stored);
  EXPECT_EQ(outbox_rows(c), static_cast<int64_t>(db::max_deliveries_per_event));
  EXPECT_EQ(rows_of(c, listener1, targets.front(), ev.id), 1) << "the first named is kept";
  EXPECT_EQ(rows_of(c, listener1, targets.back(), ev.id), 0) << "the 40th is past the cap";
}

// ---- red-team 14 (red on d98186a, green since migration 0008) ---------------------

// R14-2: rows the listener may not read (it was banned from, or removed from,
// a community where its registrations stay; or a private channel it is not
// in) were written by S6 for anyone who posted there, and then took the
// listener's turns at claim time (a claim of `room` such rows deleted them and
// claimed nothing), so the listener's readable mentions waited behind them.
// S6 now writes only rows the listener may read.
TEST_F(OutboxTest, RedTeam14_RowsTheListenerMayNotReadAreNeverWritten) {
  auto banned_in = community("banned-in");
  auto home = community("home");
  register_targets(banned_in, listener1, {target1});
  register_targets(home, listener1, {target2});
  sql("INSERT INTO community_banned_pubkeys (community_id, pubkey) VALUES (" +
      std::to_string(banned_in) + ", decode('" + listener1 + "', 'hex'))");
  // The ban left the registrations; anyone still posting there mentions target1.
  for (int i = 0; i < 8; ++i)
    ASSERT_EQ(write1(banned_in, make_event(1, 9, 1000 + i, {{"p", target1}},
                                           "unreadable " + std::to_string(i))),
              write_outcome::stored);
  EXPECT_EQ(outbox_rows(banned_in), 0) << "S6 wrote rows the listener may never receive";
  ASSERT_EQ(write1(home, make_event(1, 9, 3000, {{"p", target2}}, "readable")),
            write_outcome::stored);
  auto first = db::claim_deliveries(conn(), std::vector<db::listener_room>{{listener1, 4}}, 10);
  ASSERT_EQ(first.size(), 1u) << "the readable row was not claimed while unreadable ones were due";
  EXPECT_EQ(first[0].community_id, home);
}

// R14-3: NIP-40. docs/expiration.md: waggle "stops serving [an expiring
// event] the second it expires, on every read path". A delivery is a read by
// the listener; the claim checked deleted_at and never expires_at, so a
// mention retried past its expiration (or claimed late) was still sent until
// the expiration reaper deleted the row.
TEST_F(OutboxTest, RedTeam14_AnExpiredMentionIsNotDelivered) {
  auto c = community();
  register_targets(c, listener1, {target1});
  auto ev = make_event(1, 9, 1000, {{"p", target1}, {"expiration", std::to_string(wall_now() + 3600)}},
                       "expires");
  ASSERT_EQ(write1(c, ev), write_outcome::stored);
  // Time passes (no sleep): the event's expiration second is behind us.
  sql("UPDATE events SET expires_at = " + std::to_string(wall_now() - 1) +
      " WHERE community_id = " + std::to_string(c));
  proto::filter by_id;
  by_id.ids = std::vector<std::string>{ev.id};
  EXPECT_TRUE(query(c, by_id).empty()) << "no read serves it any more";
  EXPECT_TRUE(db::claim_deliveries(conn(), {listener1}, 10).empty())
    << "the listener is sent an event no read would serve";
}

}  // namespace
}  // namespace waggle::pgtest
