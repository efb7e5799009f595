// Red-team tests of issue 15 (push leases, the gate, the matcher, the wake
// outbox). Each test states a claim of docs/push.md or docs/lock-protocol.md
// and the interleaving or input that breaks it; they are committed failing
// (REPORT.md lists the findings and the suggested fixes).

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <thread>

#include <pqxx/except>

#include "tests/db/push_fixture.hpp"

namespace waggle::pgtest {
namespace {

class PushRedteamTest : public PushTest {
 protected:
  db::match_settings settings;

  // As the matcher actor runs it: remembering the last eight communities served.
  db::match_batch run(pqxx::connection& cn) {
    auto b = db::run_match_batch(cn, settings, push_now(), recent);
    if (b.jobs > 0) {
      recent.push_back(b.community_id);
      if (recent.size() > 8)
        recent.erase(recent.begin());
    }
    return b;
  }
  std::vector<int64_t> recent;
  // Runs matcher batches until the queue is empty (at most `max` batches).
  void drain(int max = 20) {
    for (int i = 0; i < max && count("SELECT count(*) FROM push_match_queue") > 0; ++i) {
      make_due();
      run(conn());
    }
  }
  int64_t wakes_for_grant(int64_t c, const std::string& grant, const std::string& event_id) {
    pqxx::nontransaction tx(conn());
    return tx
      .exec_params("SELECT count(*) FROM push_wake_outbox WHERE community_id = $1 "
                   "AND endpoint_grant = $2 AND event_id = decode($3, 'hex')",
                   c, grant, event_id)[0][0]
      .as<int64_t>();
  }
};

// Claim 1 (no lost wake; "the activation's backfill then reads the batch's
// events"). The backfill's INSERT ... ON CONFLICT DO NOTHING skips an event
// whose job is already queued (a live lease of another member gated it) and
// takes no lock on that job. A matcher batch that claims the job after the
// backfill statement but before the activation commits reads the leases
// without the new one, completes the job, and nothing ever matches the
// event against the new lease. Red today: member 2's phone is never woken
// for a message committed before its lease, inside the backfill window.
TEST_F(PushRedteamTest, AnActivationWakesForAQueuedJobMatchedBeforeItCommits) {
  auto c = community();
  only_community(c);
  ASSERT_EQ(lease(c, 1, {.endpoint = "grant-one"}).outcome, write_outcome::stored);
  auto msg = chat(3, "queued before member 2's lease");
  ASSERT_EQ(post(c, msg), write_outcome::stored);
  ASSERT_TRUE(has_job(c, msg.id)) << "member 1's lease gated it";
  make_due();

  auto matcher_conn = connect();
  db::match_batch during{};
  std::thread matcher;
  db::write_options o;
  // After the backfill, before COMMIT: a matcher batch starts. Fixed, it
  // waits for the activation (push_gate SHARED in its claim) and then sees
  // the new lease.
  o.before_commit = [&] {
    matcher = std::thread([&] { during = run(*matcher_conn); });
    eventually([&] { return waits_on_advisory_lock(conn(), matcher_conn->backendpid()); },
               std::chrono::seconds(2));
  };
  auto activation_conn = connect();
  auto r = db::accept_lease_event(*activation_conn,
                                  {c, ptr(lease_event(2, {.endpoint = "grant-two"}))}, o, {}, {},
                                  push_now());
  matcher.join();
  ASSERT_EQ(r.outcome, write_outcome::stored) << r.reason;

  drain();
  EXPECT_EQ(wakes_for_grant(c, "grant-one", msg.id), 1);
  EXPECT_EQ(wakes_for_grant(c, "grant-two", msg.id), 1)
    << "lost wake: the backfill saw the job queued and skipped it, and the batch that "
       "completed the job could not see the new lease";
}

// Claim 6 (the lease path cannot deadlock with other paths). A renewal
// holds its lease row (the replaced event's trigger and the upsert) and
// then, in its backfill, waits for a matcher transaction that claimed (and
// so updated) one of the backfilled jobs; the matcher's flush then asks for
// the same lease row FOR UPDATE. PostgreSQL breaks the cycle by aborting one
// of them after deadlock_timeout, with push_gate held EXCLUSIVE for that
// second (every gated ingest batch of the community waits behind it). Red
// today: the flush is aborted with 40P01. (The renewal's side keeps a long
// deadlock_timeout so the victim is the flush, deterministically.)
TEST_F(PushRedteamTest, ALeaseRenewalDoesNotDeadlockWithAMatcherBatch) {
  auto c = community();
  only_community(c);
  ASSERT_EQ(lease(c, 1, {}).outcome, write_outcome::stored);
  auto msg = chat(3, "matched while the lease is renewed");
  ASSERT_EQ(post(c, msg), write_outcome::stored);
  make_due();

  auto matcher_conn = connect();
  auto renewal_conn = connect();
  {
    pqxx::nontransaction tx(*renewal_conn);
    tx.exec("SET deadlock_timeout = '20s'");
  }
  pqxx::work m(*matcher_conn);
  auto claim = db::claim_match_jobs(m, settings);
  ASSERT_EQ(claim.jobs.size(), 1u);

  write_result renewal;
  std::thread renewer([&] {
    renewal = db::accept_lease_event(*renewal_conn,
                                     {c, ptr(lease_event(1, {.generation = 2}))}, {}, {}, {},
                                     push_now());
  });
  auto renewal_pid = renewal_conn->backendpid();
  bool renewal_waits = eventually([&] {
    pqxx::nontransaction tx(conn());
    return !tx.exec_params("SELECT 1 FROM pg_locks WHERE pid = $1 AND NOT granted", renewal_pid)
              .empty();
  });
  bool deadlocked = false;
  std::string error;
  try {
    db::flush_wakes(m, c, {{pkey(1), "phone", 1, msg.id}}, settings, push_now());
    db::complete_match_jobs(m, c, claim.claim_id, {msg.id}, {}, settings);
    m.commit();
  } catch (const pqxx::deadlock_detected& e) {
    deadlocked = true;
    error = e.what();
  } catch (const pqxx::sql_error& e) {
    deadlocked = e.sqlstate() == "40P01";
    error = e.what();
  }
  renewer.join();
  EXPECT_TRUE(renewal_waits) << "the renewal's backfill did not wait for the claimed job";
  EXPECT_FALSE(deadlocked) << "deadlock between a lease renewal and a matcher batch: " << error;
  EXPECT_EQ(renewal.outcome, write_outcome::stored) << renewal.reason;
}

// Claim 7 (cost) and "backfill amplification by re-publishing leases": each
// renewal re-enqueues every push event of the last --push-backfill-seconds,
// even those already matched against this very lease. A member re-publishing
// a lease (generation + 1, nothing else changed) turns one event into as
// many match jobs as the community's recent history, each re-matched
// against every lease of the community. Red today: 100 jobs per renewal.
TEST_F(PushRedteamTest, ARenewalDoesNotReenqueueHistoryAlreadyMatched) {
  auto c = community();
  only_community(c);
  ASSERT_EQ(lease(c, 1, {}).outcome, write_outcome::stored);
  std::vector<proto::event> evs;
  for (int i = 0; i < 100; ++i)
    evs.push_back(chat(3, "m" + std::to_string(i)));
  for (auto& r : db::write_batch(conn(), batch(c, evs)))
    ASSERT_EQ(r.outcome, write_outcome::stored);
  drain();
  ASSERT_EQ(jobs(c), 0);
  ASSERT_EQ(wakes(c), 100);
  for (int g = 2; g <= 4; ++g)
    ASSERT_EQ(lease(c, 1, {.generation = g}).outcome, write_outcome::stored);
  EXPECT_EQ(jobs(c), 0) << "three renewals of an unchanged lease re-enqueued the history";
}

// "starve other communities": the claim always serves the community of the
// oldest due job, 64 jobs at a time, so a backlog in one community (a
// backfill of a busy community, or the renewals above) delays every other
// community's first wake by backlog/64 batches (each at most every
// --push-match-interval-ms). Red today: community B's lone job waits for
// four batches of community A.
TEST_F(PushRedteamTest, OneCommunitysBacklogDoesNotStarveAnother) {
  auto a = community("a");
  auto b = community("b");
  only_community(-1);
  ASSERT_EQ(lease(a, 1, {.endpoint = "grant-a"}).outcome, write_outcome::stored);
  ASSERT_EQ(lease(b, 1, {.endpoint = "grant-b"}).outcome, write_outcome::stored);
  std::vector<proto::event> in_a;
  for (int i = 0; i < 200; ++i)
    in_a.push_back(chat(3, "a" + std::to_string(i)));
  ASSERT_EQ(db::write_batch(conn(), batch(a, in_a)).size(), 200u);
  ASSERT_EQ(post(b, chat(3, "b's only message")), write_outcome::stored);
  {
    pqxx::nontransaction tx(conn());
    tx.exec_params("UPDATE push_match_queue SET next_attempt_at = now() - interval '2 seconds' "
                   "WHERE community_id = $1",
                   a);
    tx.exec_params("UPDATE push_match_queue SET next_attempt_at = now() - interval '1 second' "
                   "WHERE community_id = $1",
                   b);
  }
  int served_at = -1;
  for (int i = 0; i < 8 && served_at < 0; ++i)
    if (run(conn()).community_id == b)
      served_at = i;
  EXPECT_GE(served_at, 0);
  EXPECT_LE(served_at, 1) << "community B's job waited behind " << served_at
                          << " batches of community A's backlog";
}

// Claim 2 (exactly once per phone): the dedup key is (community,
// endpoint_hash, event), so an installation that rotates its push token
// (renewal with a new `endpoint`, same `d`) is woken again, on the new
// token, for every event of the backfill window it was already woken for.
// Red today: two wakes for one event to one installation.
TEST_F(PushRedteamTest, ATokenRotationDoesNotWakeTheSameInstallationTwice) {
  auto c = community();
  only_community(c);
  ASSERT_EQ(lease(c, 1, {.endpoint = "token-old"}).outcome, write_outcome::stored);
  auto msg = chat(3, "woken once");
  ASSERT_EQ(post(c, msg), write_outcome::stored);
  drain();
  ASSERT_EQ(wakes_for_grant(c, "token-old", msg.id), 1);
  ASSERT_EQ(lease(c, 1, {.endpoint = "token-new", .generation = 2}).outcome,
            write_outcome::stored);
  drain();
  EXPECT_EQ(count("SELECT count(*) FROM push_wake_outbox WHERE community_id = " +
                  std::to_string(c) + " AND author = decode('" + pkey(1) +
                  "', 'hex') AND installation_id = 'phone'"),
            1)
    << "the installation was woken a second time for the same event";
}

// Claim 2 (every owed wake is eventually delivered, at least once on
// retries): a wake waiting for its retry (a 5xx) is revalidated at the
// lease generation it was written for, so an ordinary renewal of the lease
// (generation + 1, same endpoint: extending its expiry) fails it, and the
// renewal's backfill cannot restore it (the dedup key still holds the
// failed row). Red today: the owed wake ends `failed` and is never sent.
TEST_F(PushRedteamTest, ARenewalDoesNotDropAnOwedRetry) {
  auto c = community();
  only_community(c);
  ASSERT_EQ(lease(c, 1, {}).outcome, write_outcome::stored);
  auto msg = chat(3, "the gateway answered 503");
  ASSERT_EQ(post(c, msg), write_outcome::stored);
  make_due();
  auto b = run(conn());
  ASSERT_EQ(b.ready.size(), 1u);
  auto held = db::complete_wakes(conn(),
                                 {{c, b.ready[0].id, b.ready[0].claim_id,
                                   db::wake_completion::retry, std::chrono::milliseconds(0)}},
                                 8);
  ASSERT_TRUE(held.at(0));
  ASSERT_EQ(lease(c, 1, {.generation = 2}).outcome, write_outcome::stored);  // same endpoint
  drain();
  auto claimed = db::claim_wakes(conn(), 10, std::chrono::seconds(30), 8);
  EXPECT_EQ(claimed.size(), 1u) << "the owed retry was dropped by the lease's renewal";
  EXPECT_EQ(wakes(c, "state = 'failed'"), 0);
}

// "events that make the matcher loop": the claim is in the batch's own
// transaction, so a batch that fails anywhere outside the flush's savepoint
// (statement_timeout 5 s on the events, leases or readable-pairs statement:
// e.g. a community whose keys hold thousands of leases, 64 x authors pairs)
// rolls its claim back with `attempts` unchanged. The same jobs stay the
// oldest due ones, the next poll claims them again, and the 8-attempt cap
// never engages: the matcher retries that community every 2 s forever and
// no other community is served. Forced here by a lock that makes the leases
// statement time out (standing in for a statement too slow for the timeout).
// Red today: attempts stays 0 after three failed batches.
TEST_F(PushRedteamTest, ABatchThatFailsBeforeItsFlushStillCountsTheAttempt) {
  auto c = community();
  only_community(c);
  ASSERT_EQ(lease(c, 1, {}).outcome, write_outcome::stored);
  auto msg = chat(3, "a job whose batch keeps failing");
  ASSERT_EQ(post(c, msg), write_outcome::stored);
  auto matcher_conn = connect();
  {
    pqxx::nontransaction tx(*matcher_conn);
    tx.exec("SET statement_timeout = 300");
  }
  auto blocker = connect();
  int failures = 0;
  {
    pqxx::work hold(*blocker);
    hold.exec("LOCK TABLE push_leases IN ACCESS EXCLUSIVE MODE");
    for (int i = 0; i < 3; ++i) {
      make_due();
      try {
        run(*matcher_conn);
      } catch (const std::exception&) {  // the batch says it failed (and counted the attempt)
        ++failures;
      }
    }
    hold.abort();
  }
  ASSERT_EQ(failures, 3);
  EXPECT_GE(count("SELECT coalesce(max(attempts), 0) FROM push_match_queue WHERE community_id = " +
                  std::to_string(c)),
            3)
    << "failed batches left no trace on their jobs: the attempt cap can never engage";
}

// Claim 4 (no one sees another's wake endpoint): a lease event is stored as
// an ordinary event with its `endpoint` grant in the clear, and the read
// path serves kind 30350 like any other kind: any reader of the community
// (every key, in an open one) learns every member's push grant, which it may
// then lease in a community of its own (endpoint uniqueness is per
// community) so that the relay, with its NIP-98 signature, wakes the
// victim's phone for the attacker's messages. Red today: the grant is read.
TEST_F(PushRedteamTest, AnotherReaderCannotReadALeasesEndpointGrant) {
  auto c = community();
  ASSERT_EQ(lease(c, 1, {.endpoint = "secret-fcm-token-of-member-1"}).outcome,
            write_outcome::stored);
  proto::filter f;
  f.kinds = std::vector<int32_t>{proto::push::kind_lease};
  auto raws = db::query_events(conn(), c, {f}, proto::filter_limits{}, push_now());
  for (const auto& raw : raws)
    EXPECT_EQ(raw.find("secret-fcm-token-of-member-1"), std::string::npos)
      << "a REQ for kind 30350 returns the lease with its endpoint grant: " << raw;
}

}  // namespace
}  // namespace waggle::pgtest
