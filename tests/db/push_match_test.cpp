// The matcher's batch and the wake outbox (docs/push.md, "The matcher",
// "Delivery"): the claim and its fence, set-wise wake outcomes, the sweep,
// 410 handling, retries and revalidation, and the constant statement count.

#include <thread>

#include "tests/db/push_fixture.hpp"

namespace waggle::pgtest {
namespace {

namespace push = proto::push;

class PushMatchTest : public PushTest {
 protected:
  db::match_settings settings;

  // A community with a live lease by signer 1, and `n` chat messages by
  // signer 2 (each a job).
  int64_t with_jobs(size_t n, std::vector<std::string>* ids = nullptr) {
    auto c = community();
    only_community(c);
    EXPECT_EQ(lease(c, 1, {}).outcome, write_outcome::stored);
    std::vector<proto::event> evs;
    for (size_t i = 0; i < n; ++i)
      evs.push_back(chat(2, "m" + std::to_string(i)));
    for (auto& r : db::write_batch(conn(), batch(c, evs)))
      EXPECT_EQ(r.outcome, write_outcome::stored);
    if (ids)
      for (auto& e : evs)
        ids->push_back(e.id);
    make_due();
    return c;
  }
  db::match_batch run() { return db::run_match_batch(conn(), settings, push_now()); }
};

TEST_F(PushMatchTest, AStaleClaimIdCompletesNothing) {
  std::vector<std::string> ids;
  auto c = with_jobs(3, &ids);
  pqxx::work tx(conn());
  auto claim = db::claim_match_jobs(tx, settings);
  ASSERT_EQ(claim.jobs.size(), 3u);
  EXPECT_EQ(db::complete_match_jobs(tx, c, "00000000-0000-0000-0000-000000000000", ids, {},
                                    settings),
            0u);
  EXPECT_EQ(db::complete_match_jobs(tx, c, claim.claim_id, ids, {}, settings), 3u);
  tx.commit();
  EXPECT_EQ(jobs(c), 0);
}

TEST_F(PushMatchTest, AClaimTakesAtMost64JobsOfOneCommunity) {
  auto a = community("a");
  auto b = community("b");
  only_community(-1);
  ASSERT_EQ(lease(a, 1, {}).outcome, write_outcome::stored);
  ASSERT_EQ(lease(b, 1, {.endpoint = "grant-b"}).outcome, write_outcome::stored);
  std::vector<proto::event> in_a, in_b;
  for (int i = 0; i < 70; ++i)
    in_a.push_back(chat(2, "a" + std::to_string(i)));
  for (int i = 0; i < 5; ++i)
    in_b.push_back(chat(2, "b" + std::to_string(i)));
  db::write_batch(conn(), batch(b, in_b));
  db::write_batch(conn(), batch(a, in_a));
  make_due();
  pqxx::work tx(conn());
  auto first = db::claim_match_jobs(tx, settings);
  EXPECT_EQ(first.community_id, b) << "the oldest due job decides the community";
  EXPECT_EQ(first.jobs.size(), 5u);
  auto second = db::claim_match_jobs(tx, settings);
  EXPECT_EQ(second.community_id, a);
  EXPECT_EQ(second.jobs.size(), 64u);
  tx.abort();
}

TEST_F(PushMatchTest, TwoConcurrentClaimersNeverShareAJob) {
  auto c = with_jobs(40);
  auto other = connect();
  db::match_settings small = settings;
  small.max_jobs = 30;
  pqxx::work first(conn());
  auto a = db::claim_match_jobs(first, small);
  pqxx::work second(*other);
  auto b = db::claim_match_jobs(second, small);  // SKIP LOCKED: does not wait
  EXPECT_EQ(a.jobs.size(), 30u);
  EXPECT_EQ(b.jobs.size(), 10u);
  for (const auto& x : a.jobs)
    for (const auto& y : b.jobs)
      EXPECT_NE(x.event_id, y.event_id);
  first.commit();
  second.commit();
  (void)c;
}

// Retries and lapsed claims reach delivery only through claim_wakes, which
// every node's push supervisor runs on its poll: a wake another node's claim
// holds (its row lock, taken mid-statement) is neither waited for nor taken.
// Red with SKIP LOCKED taken out of the claim, and with its whole row lock:
// the claim waits for the held row and the lock timeout fires (without the
// row lock, a claim that waited on another's update would then claim the row
// again). tests/e2e/cluster_claims_test.cpp stayed green with the row lock
// taken out: two nodes' polls seldom claim in the same millisecond.
TEST_F(PushMatchTest, TwoConcurrentWakeClaimersNeverShareAWake) {
  auto c = with_jobs(3);
  auto b = run();
  ASSERT_EQ(b.ready.size(), 3u);
  std::vector<db::wake_complete> back;
  for (const auto& w : b.ready)
    back.push_back({c, w.id, w.claim_id, db::wake_completion::retry, std::chrono::milliseconds(0)});
  db::complete_wakes(conn(), back, 8);
  auto holder = connect();
  pqxx::work holding(*holder);
  holding.exec_params("SELECT 1 FROM push_wake_outbox WHERE community_id = $1 AND id = $2 "
                      "FOR UPDATE",
                      c, b.ready[0].id);
  auto claimer = connect();
  pqxx::nontransaction(*claimer).exec("SET lock_timeout = '2s'");
  auto got = db::claim_wakes(*claimer, 10, std::chrono::seconds(30), 8);
  EXPECT_EQ(got.size(), 2u);
  for (const auto& g : got)
    EXPECT_NE(g.wake.id, b.ready[0].id) << "a wake another claim holds";
  holding.commit();
  auto rest = db::claim_wakes(*claimer, 10, std::chrono::seconds(30), 8);
  ASSERT_EQ(rest.size(), 1u);
  EXPECT_EQ(rest[0].wake.id, b.ready[0].id);
}

TEST_F(PushMatchTest, ABatchWakesTheLeaseHolderOnceAndCompletesItsJobs) {
  std::vector<std::string> ids;
  auto c = with_jobs(4, &ids);
  auto b = run();
  EXPECT_EQ(b.jobs, 4u);
  EXPECT_EQ(b.matched, 4u);
  EXPECT_EQ(b.wakes[db::wake_outcome::enqueued], 4u);
  EXPECT_EQ(b.ready.size(), 4u);
  EXPECT_EQ(jobs(c), 0);
  EXPECT_EQ(wakes(c, "state = 'sending'"), 4) << "handed to delivery already claimed";
  // The same events matched again (a backfill): duplicates, no second wake.
  {
    pqxx::nontransaction tx(conn());
    for (auto& id : ids)
      tx.exec_params("INSERT INTO push_match_queue (community_id, event_id, next_attempt_at) "
                     "VALUES ($1, decode($2, 'hex'), now() - interval '1 second')",
                     c, id);
  }
  auto again = run();
  EXPECT_EQ(again.wakes[db::wake_outcome::duplicate], 4u);
  EXPECT_EQ(wakes(c), 4);
}

TEST_F(PushMatchTest, NobodyIsWokenForTheirOwnMessageOrAMutedChannel) {
  auto c = community();
  only_community(c);
  ASSERT_EQ(lease(c, 1, {.mutes = {"random"}}).outcome, write_outcome::stored);
  ASSERT_EQ(post(c, chat(1, "my own")), write_outcome::stored);
  make_due();
  auto b = run();
  EXPECT_EQ(b.unmatched, 1u);
  EXPECT_EQ(wakes(c), 0);
}

TEST_F(PushMatchTest, ARemovedMembersPhoneIsNotWoken) {
  auto c = community();
  only_community(c);
  ASSERT_TRUE(db::add_member(conn(), c, pkey(1), member_role::member, "").has_value());
  ASSERT_TRUE(db::add_member(conn(), c, pkey(2), member_role::member, "").has_value());
  ASSERT_TRUE(db::set_policy(conn(), c, community_policy::closed).has_value());
  ASSERT_EQ(lease(c, 1, {}).outcome, write_outcome::stored);
  auto first = chat(2, "while a member");
  ASSERT_EQ(post(c, first), write_outcome::stored);
  make_due();
  ASSERT_EQ(run().ready.size(), 1u);
  // Removed: the next message wakes nobody, and the pending retry of the
  // first one is suppressed at its claim.
  {
    pqxx::nontransaction tx(conn());
    tx.exec("UPDATE push_wake_outbox SET state = 'pending', claim_id = NULL, "
            "next_attempt_at = now() - interval '1 second'");
  }
  ASSERT_TRUE(db::remove_member(conn(), c, pkey(1), "").has_value());
  ASSERT_EQ(post(c, chat(2, "after the removal")), write_outcome::stored);
  make_due();
  auto b = run();
  EXPECT_EQ(b.unmatched, 1u);
  EXPECT_EQ(b.ready.size(), 0u);
  size_t suppressed = 0;
  EXPECT_TRUE(db::claim_wakes(conn(), 10, std::chrono::seconds(30), 8, &suppressed).empty());
  EXPECT_EQ(suppressed, 1u);
  EXPECT_EQ(wakes(c, "state = 'failed'"), 1);
}

TEST_F(PushMatchTest, SetWiseOutcomesAreAlignedWithTheRequests) {
  auto c = community();
  only_community(c);
  ASSERT_EQ(lease(c, 1, {.endpoint = "one"}).outcome, write_outcome::stored);
  ASSERT_EQ(lease(c, 3, {.endpoint = "three"}).outcome, write_outcome::stored);
  auto committed = chat(2, "already woken");
  auto fresh = chat(2, "fresh");
  ASSERT_EQ(post(c, committed), write_outcome::stored);
  ASSERT_EQ(post(c, fresh), write_outcome::stored);
  {
    pqxx::work tx(conn());
    auto f = db::flush_wakes(tx, c, {{pkey(1), "phone", 1, committed.id}}, settings, push_now());
    tx.commit();
    ASSERT_EQ(f.outcomes.at(0), db::wake_outcome::enqueued);
  }
  std::vector<db::wake_enqueue> req = {
    {pkey(1), "phone", 1, fresh.id},      // fresh insert
    {pkey(1), "phone", 1, committed.id},  // duplicate of a committed wake
    {pkey(1), "phone", 1, fresh.id},      // same-batch collision with the first
    {pkey(3), "phone", 7, fresh.id},      // stale generation
    {pkey(4), "phone", 1, fresh.id},      // unknown lease
    {pkey(3), "phone", 1, fresh.id},      // a second live lease in the batch
  };
  pqxx::work tx(conn());
  auto f = db::flush_wakes(tx, c, req, settings, push_now());
  tx.commit();
  using o = db::wake_outcome;
  EXPECT_EQ(f.outcomes, (std::vector<o>{o::enqueued, o::duplicate, o::duplicate,
                                        o::inactive_lease, o::inactive_lease, o::enqueued}));
  EXPECT_EQ(f.ready.size(), 2u);
  EXPECT_EQ(wakes(c), 3);
}

TEST_F(PushMatchTest, ExhaustedJobsAreReapedBySweepNotClaimed) {
  auto c = with_jobs(2);
  {
    pqxx::nontransaction tx(conn());
    tx.exec_params("UPDATE push_match_queue SET attempts = 8 WHERE community_id = $1", c);
  }
  pqxx::work tx(conn());
  EXPECT_TRUE(db::claim_match_jobs(tx, settings).jobs.empty());
  tx.commit();
  EXPECT_EQ(db::reap_exhausted_matches(conn(), settings), 2u);
  EXPECT_EQ(jobs(c), 0);
}

TEST_F(PushMatchTest, AGoneEndpointDisablesOnlyItsGeneration) {
  auto c = with_jobs(1);
  auto b = run();
  ASSERT_EQ(b.ready.size(), 1u);
  // The lease renewed meanwhile: a 410 for generation 1 must not disable 2.
  ASSERT_EQ(lease(c, 1, {.generation = 2}).outcome, write_outcome::stored);
  auto held = db::complete_wakes(
    conn(), {{c, b.ready[0].id, b.ready[0].claim_id, db::wake_completion::gone, {}}}, 8);
  EXPECT_TRUE(held.at(0));
  EXPECT_EQ(count("SELECT count(*) FROM push_leases WHERE endpoint_enabled AND community_id = " +
                  std::to_string(c)),
            1);
  // Sent for the current generation, a 410 disables it.
  auto msg = chat(2, "for generation 2");
  ASSERT_EQ(post(c, msg), write_outcome::stored);
  make_due();
  auto b2 = run();
  ASSERT_EQ(b2.ready.size(), 1u);
  db::complete_wakes(conn(), {{c, b2.ready[0].id, b2.ready[0].claim_id, db::wake_completion::gone, {}}},
                     8);
  EXPECT_EQ(count("SELECT count(*) FROM push_leases WHERE endpoint_enabled AND community_id = " +
                  std::to_string(c)),
            0);
}

TEST_F(PushMatchTest, RetriesReuseTheRequestIdAndStaleClaimsAreFenced) {
  auto c = with_jobs(1);
  auto b = run();
  ASSERT_EQ(b.ready.size(), 1u);
  auto first = b.ready[0];
  auto held = db::complete_wakes(
    conn(), {{c, first.id, first.claim_id, db::wake_completion::retry, std::chrono::milliseconds(0)}},
    8);
  ASSERT_TRUE(held.at(0));
  auto again = db::claim_wakes(conn(), 10, std::chrono::seconds(30), 8);
  ASSERT_EQ(again.size(), 1u);
  EXPECT_EQ(again[0].wake.request_id, first.request_id);
  EXPECT_NE(again[0].wake.claim_id, first.claim_id);
  EXPECT_EQ(again[0].wake.attempts, 2);
  // The first claim's completion arrives late: fenced, changes nothing.
  held = db::complete_wakes(conn(), {{c, first.id, first.claim_id, db::wake_completion::delivered, {}}},
                            8);
  EXPECT_FALSE(held.at(0));
  EXPECT_EQ(wakes(c, "state = 'sending'"), 1);
}

// A flush that fails (here: a trigger that refuses the insert) rolls back to
// its savepoint; only the jobs that contributed wakes go back, the others
// complete in the same transaction.
TEST_F(PushMatchTest, AFailedFlushSendsBackOnlyTheJobsThatContributed) {
  auto c = community();
  only_community(c);
  ASSERT_EQ(lease(c, 1, {}).outcome, write_outcome::stored);
  auto own = chat(1, "the holder's own: no wake");
  auto other = chat(2, "wakes the holder");
  ASSERT_EQ(post(c, own), write_outcome::stored);
  ASSERT_EQ(post(c, other), write_outcome::stored);
  make_due();
  {
    pqxx::nontransaction tx(conn());
    tx.exec("CREATE FUNCTION pg_temp.refuse() RETURNS trigger LANGUAGE plpgsql AS "
            "$$ BEGIN RAISE EXCEPTION 'flush refused' USING ERRCODE = 'P0001'; END $$");
    tx.exec("CREATE TRIGGER refuse_wakes BEFORE INSERT ON push_wake_outbox "
            "FOR EACH ROW EXECUTE FUNCTION pg_temp.refuse()");
  }
  auto b = run();
  {
    pqxx::nontransaction tx(conn());
    tx.exec("DROP TRIGGER refuse_wakes ON push_wake_outbox");
  }
  EXPECT_EQ(b.jobs, 2u);
  EXPECT_EQ(b.unmatched, 1u);
  EXPECT_EQ(b.retried, 1u);
  EXPECT_TRUE(b.ready.empty());
  EXPECT_FALSE(has_job(c, own.id)) << "no wake to flush: completed";
  EXPECT_TRUE(has_job(c, other.id)) << "its wake was lost with the flush: sent back";
  EXPECT_EQ(count("SELECT count(*) FROM push_match_queue WHERE state = 'pending' "
                  "AND next_attempt_at > now() AND attempts = 1"),
            1);
  // The retry, once due, wakes the holder.
  make_due();
  EXPECT_EQ(run().ready.size(), 1u);
}

// Round trips to the server, counted from libpq's own protocol trace
// (PQtrace): every simple query and every Sync of an extended query.
size_t round_trips(std::FILE* trace) {
  std::fflush(trace);
  std::rewind(trace);
  size_t n = 0;
  char line[4096];
  while (std::fgets(line, sizeof line, trace)) {
    std::string l(line);
    if (l.find("\tF\t") == std::string::npos && l.rfind("F\t", 0) != 0)
      continue;
    if (l.find("\tQuery\t") != std::string::npos || l.find("\tSync") != std::string::npos)
      ++n;
  }
  return n;
}

// Statements per batch do not grow with the batch: 1, 8 and 64 jobs, each
// with a wake, cost the same number, counted by the matcher and on the wire.
TEST_F(PushMatchTest, AMatcherBatchCostsTheSameStatementsWhateverItsSize) {
  std::vector<size_t> counted, sent;
  // Warm: statements are prepared once per connection, not per batch.
  with_jobs(1);
  ASSERT_EQ(run().ready.size(), 1u);
  for (size_t n : {1u, 8u, 64u}) {
    with_jobs(n);
    std::FILE* trace = std::tmpfile();
    ASSERT_NE(trace, nullptr);
    conn().trace(trace);
    auto b = run();
    conn().trace(nullptr);
    ASSERT_EQ(b.jobs, n);
    ASSERT_EQ(b.ready.size(), n);
    counted.push_back(b.statements);
    sent.push_back(round_trips(trace));
    std::fclose(trace);
  }
  EXPECT_EQ(counted[0], counted[1]);
  EXPECT_EQ(counted[1], counted[2]);
  EXPECT_LE(counted[0], 8u);
  EXPECT_GT(sent[0], 0u);
  EXPECT_EQ(sent[0], sent[1]);
  EXPECT_EQ(sent[1], sent[2]);
}

}  // namespace
}  // namespace waggle::pgtest
