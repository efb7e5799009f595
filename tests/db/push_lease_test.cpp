// Push leases and the push gate (docs/push.md, "Leases", "The gate"):
// acceptance rules as protocol outcomes, and the lost-wake ordering forced
// both ways with the real statements on two connections.

#include <atomic>
#include <thread>

#include "tests/db/push_fixture.hpp"

namespace waggle::pgtest {
namespace {

class gate_latch {
 public:
  void open() {
    std::lock_guard lk(m_);
    open_ = true;
    cv_.notify_all();
  }
  void wait() {
    std::unique_lock lk(m_);
    cv_.wait(lk, [&] { return open_; });
  }

 private:
  std::mutex m_;
  std::condition_variable cv_;
  bool open_ = false;
};

class PushLeaseTest : public PushTest {
 protected:
  int64_t lease_generation(int64_t c, int author, const std::string& installation = "phone") {
    pqxx::nontransaction tx(conn());
    auto r = tx.exec_params(
      "SELECT generation FROM push_leases WHERE community_id = $1 AND author = decode($2, 'hex') "
      "AND installation_id = $3 AND active",
      c, pkey(author), installation);
    return r.empty() ? 0 : r[0][0].as<int64_t>();
  }
};

TEST_F(PushLeaseTest, ALeaseIsStoredWithItsLeaseRow) {
  auto c = community();
  auto ev = lease_event(1, {});
  auto r = db::accept_lease_event(conn(), {c, ptr(ev)}, {}, {}, {}, push_now());
  ASSERT_EQ(r.outcome, write_outcome::stored) << r.reason;
  EXPECT_TRUE(is_live(c, ev.id));
  EXPECT_EQ(lease_generation(c, 1), 1);
}

TEST_F(PushLeaseTest, TheOrdinaryWritePathRefusesLeaseEvents) {
  auto c = community();
  auto r = db::write_batch(conn(), batch(c, {lease_event(1, {})}));
  EXPECT_EQ(r.at(0).outcome, write_outcome::rejected);
  EXPECT_EQ(count("SELECT count(*) FROM push_leases WHERE community_id = " + std::to_string(c)), 0);
}

TEST_F(PushLeaseTest, MalformedLeasesAreInvalidAndStoreNothing) {
  auto c = community();
  auto no_generation = make_event(1, proto::push::kind_lease, push_time(),
                                  {{"d", "phone"}, {"endpoint", "g"}, {"app", "a"},
                                   {"expiration", std::to_string(push_now() + 60)}});
  auto r = db::accept_lease_event(conn(), {c, ptr(no_generation)}, {}, {}, {}, push_now());
  EXPECT_EQ(r.outcome, write_outcome::rejected);
  EXPECT_NE(r.reason.find("generation"), std::string::npos) << r.reason;
  EXPECT_EQ(live_rows(c), 0);
  auto sql_looking = lease_event(1, {.installation = "x'; DROP TABLE push_leases; --"});
  r = db::accept_lease_event(conn(), {c, ptr(sql_looking)}, {}, {}, {}, push_now());
  EXPECT_EQ(r.outcome, write_outcome::rejected);
  EXPECT_EQ(live_rows(c), 0);
}

TEST_F(PushLeaseTest, ANewerLeaseNeedsAStrictlyRisingGeneration) {
  auto c = community();
  ASSERT_EQ(lease(c, 1, {.generation = 5}).outcome, write_outcome::stored);
  auto same = lease_event(1, {.generation = 5});
  auto r = db::accept_lease_event(conn(), {c, ptr(same)}, {}, {}, {}, push_now());
  EXPECT_EQ(r.outcome, write_outcome::rejected);
  EXPECT_FALSE(exists(c, same.id)) << "a refused lease leaves no event behind";
  EXPECT_EQ(lease_generation(c, 1), 5);
  ASSERT_EQ(lease(c, 1, {.generation = 6}).outcome, write_outcome::stored);
  EXPECT_EQ(lease_generation(c, 1), 6);
  EXPECT_EQ(live_rows(c), 1) << "the older lease event is replaced";
}

TEST_F(PushLeaseTest, AnOlderLeaseEventChangesNothing) {
  auto c = community();
  ASSERT_EQ(lease(c, 1, {.generation = 2}).outcome, write_outcome::stored);
  auto older = lease_event(1, {.generation = 3, .created_at = push_now() - 90000});
  auto r = db::accept_lease_event(conn(), {c, ptr(older)}, {}, {}, {}, push_now());
  EXPECT_EQ(r.outcome, write_outcome::superseded);
  EXPECT_EQ(lease_generation(c, 1), 2);
}

TEST_F(PushLeaseTest, TheQuotaIsAProtocolOutcome) {
  auto c = community();
  for (int i = 0; i < 10; ++i)
    ASSERT_EQ(lease(c, 1, {.installation = "i" + std::to_string(i),
                           .endpoint = "e" + std::to_string(i)})
                .outcome,
              write_outcome::stored);
  auto r = lease(c, 1, {.installation = "eleventh", .endpoint = "e-11"});
  EXPECT_EQ(r.outcome, write_outcome::blocked) << r.reason;
  // Renewing one of the ten is not a new lease.
  EXPECT_EQ(lease(c, 1, {.installation = "i3", .endpoint = "e3", .generation = 2}).outcome,
            write_outcome::stored);
}

TEST_F(PushLeaseTest, AnEndpointIsLeasedOnceInACommunity) {
  auto c = community();
  ASSERT_EQ(lease(c, 1, {.endpoint = "shared"}).outcome, write_outcome::stored);
  EXPECT_EQ(lease(c, 2, {.endpoint = "shared"}).outcome, write_outcome::rejected);
  auto other = community("other");
  EXPECT_EQ(lease(other, 2, {.endpoint = "shared"}).outcome, write_outcome::stored);
}

TEST_F(PushLeaseTest, DeletingTheLeaseEventEndsTheLease) {
  auto c = community();
  auto ev = lease_event(1, {});
  ASSERT_EQ(db::accept_lease_event(conn(), {c, ptr(ev)}, {}, {}, {}, push_now()).outcome,
            write_outcome::stored);
  ASSERT_EQ(post(c, make_event(1, 5, push_time(), {{"e", ev.id}})), write_outcome::stored);
  EXPECT_EQ(lease_generation(c, 1), 0);
  EXPECT_EQ(post(c, chat(2)), write_outcome::stored);
  EXPECT_EQ(jobs(c), 0) << "no live lease, no job";
}

TEST_F(PushLeaseTest, TheGateEnqueuesOnlyWhileALiveLeaseExists) {
  auto c = community();
  ASSERT_EQ(post(c, chat(2, "before any lease")), write_outcome::stored);
  EXPECT_EQ(jobs(c), 0);
  ASSERT_EQ(lease(c, 1, {.expires_in = 3600}).outcome, write_outcome::stored);
  auto msg = chat(2, "after");
  ASSERT_EQ(post(c, msg), write_outcome::stored);
  EXPECT_TRUE(has_job(c, msg.id));
  auto note = make_event(2, 1, push_time(), {}, "kind 1 is not a push kind");
  ASSERT_EQ(post(c, note), write_outcome::stored);
  EXPECT_FALSE(has_job(c, note.id));
  // A community the batch is told has no lease skips the gate statement.
  auto skipped = chat(2, "skipped");
  db::write_options o;
  o.push_gated = std::vector<int64_t>{};
  ASSERT_EQ(db::write_batch(conn(), batch(c, {skipped}), o).at(0).outcome, write_outcome::stored);
  EXPECT_FALSE(has_job(c, skipped.id));
}

TEST_F(PushLeaseTest, ActivationBackfillsRecentEventsAndTheSkippedOnes) {
  auto c = community();
  auto recent = chat(2, "recent");
  auto old = chat(2, "old");
  auto skipped = chat(2, "skipped by the gate cache");
  ASSERT_EQ(post(c, recent), write_outcome::stored);
  ASSERT_EQ(post(c, old), write_outcome::stored);
  ASSERT_EQ(post(c, skipped), write_outcome::stored);
  {
    pqxx::nontransaction tx(conn());
    tx.exec_params("UPDATE events SET received_at = now() - interval '10 minutes' "
                   "WHERE community_id = $1 AND id IN (decode($2, 'hex'), decode($3, 'hex'))",
                   c, old.id, skipped.id);
  }
  ASSERT_EQ(lease(c, 1, {}, {skipped.id}).outcome, write_outcome::stored);
  EXPECT_TRUE(has_job(c, recent.id));
  EXPECT_FALSE(has_job(c, old.id)) << "older than the backfill window";
  EXPECT_TRUE(has_job(c, skipped.id)) << "named by ingest: enqueued whatever its age";
}

// The activation holds push_gate EXCLUSIVE (held open before its COMMIT);
// a message inserted meanwhile must wait at its gate statement and then see
// the lease. Red when waggle_push_gate takes no lock (the message sees no
// lease and the activation's backfill ran before the message existed).
TEST_F(PushLeaseTest, AnInsertWaitsForAnActivationAndThenSeesTheLease) {
  auto c = community();
  auto activation_conn = connect();
  auto insert_conn = connect();
  gate_latch holding, release;
  std::atomic<bool> insert_done{false};
  write_result activation;
  std::thread activator([&] {
    db::write_options o;
    o.before_commit = [&] {
      holding.open();
      release.wait();
    };
    activation = db::accept_lease_event(*activation_conn, {c, ptr(lease_event(1, {}))}, o, {}, {},
                                        push_now());
  });
  holding.wait();
  auto msg = chat(2, "racing the activation");
  std::thread inserter([&] {
    db::write_batch(*insert_conn, batch(c, {msg}));
    insert_done = true;
  });
  bool waited = eventually([&] { return waits_on_advisory_lock(conn(), insert_conn->backendpid()); },
                           std::chrono::seconds(5));
  release.open();
  activator.join();
  inserter.join();
  ASSERT_EQ(activation.outcome, write_outcome::stored) << activation.reason;
  EXPECT_TRUE(waited) << "the insert did not wait for the activation's gate lock";
  EXPECT_TRUE(has_job(c, msg.id)) << "lost wake: the insert missed the lease";
}

// The other way: a message holding push_gate SHARED (before its COMMIT);
// the activation must wait, and its backfill must then see the message.
// Red when the activation takes no EXCLUSIVE lock.
TEST_F(PushLeaseTest, AnActivationWaitsForAnInsertAndBackfillsIt) {
  auto c = community();
  auto activation_conn = connect();
  auto insert_conn = connect();
  gate_latch holding, release;
  auto msg = chat(2, "committed under the shared gate");
  std::thread inserter([&] {
    db::write_options o;
    o.before_commit = [&] {
      holding.open();
      release.wait();
    };
    db::write_batch(*insert_conn, batch(c, {msg}), o);
  });
  holding.wait();
  write_result activation;
  std::thread activator([&] { activation = lease_on(*activation_conn, c, 1, {}); });
  bool waited = eventually(
    [&] { return waits_on_advisory_lock(conn(), activation_conn->backendpid()); },
    std::chrono::seconds(5));
  release.open();
  inserter.join();
  activator.join();
  ASSERT_EQ(activation.outcome, write_outcome::stored) << activation.reason;
  EXPECT_TRUE(waited) << "the activation did not wait for the insert's shared gate lock";
  EXPECT_TRUE(has_job(c, msg.id)) << "lost wake: the backfill missed the message";
}

}  // namespace
}  // namespace waggle::pgtest
