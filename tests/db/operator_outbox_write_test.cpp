// Operator listeners, the db layer (docs/delivery.md, "Outbox"): mention rows
// written in the event's transaction and their NOTIFY, registrations and their
// cap, and red-team 14 (rows a listener may not read). Claims and completions:
// operator_outbox_claim_test.cpp. Fixture: operator_outbox_fixture.hpp.

#include <string>
#include <thread>
#include <vector>

#include "tests/db/operator_outbox_fixture.hpp"

namespace waggle::pgtest {
namespace {

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
