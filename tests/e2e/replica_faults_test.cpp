// Replica faults in the middle of a routed read (issue 17, must-shows 4 and 5;
// docs/replicas.md, "Routing", step 7), against the streaming standby that
// ./scripts/test starts. A reader session runs with a routing context whose
// test hook fires after the replica's proof and before the page's statements:
// there the fault is injected, so the read is really mid-transaction on the
// replica when it fails. The client's answer must be the complete page, from
// the writer, never a partial one.
//
// Red checks (docs/replicas.md, "Tests"): with the rerun on the writer
// removed (run_routed's replica_error answered as an error), both tests fail
// with "error: query failed" / "database unavailable"; with the watchdog off,
// the blackhole test hangs until its failure detector.

#include <chrono>
#include <cstdio>
#include <string>

#include "tests/e2e/replica_route_fixture.hpp"

namespace waggle {
namespace {

using namespace std::chrono_literals;
using namespace replica_test;

int pid_of(const std::string& backend) {
  auto at = backend.rfind("pid=");
  return at == std::string::npos ? 0 : std::stoi(backend.substr(at + 4));
}

class replica_faults : public replica_test::replica_route_fixture {
 protected:
  replica_faults() : replica_route_fixture("faults") {}
};

TEST_F(replica_faults, AHealthyStandbyServesTheCoveredPage) {
  prove();
  auto a = read(covered_read());
  ASSERT_TRUE(a.answered);
  ASSERT_TRUE(a.reply.err.ok()) << a.reply.err.message();
  EXPECT_EQ(a.reply.raws.size(), 50u);
  EXPECT_EQ(decisions(replica_covered), 1u);
}

// Issue 34 (a hostile client holding every replica connection): with a
// share of one connection per community, a read of the community while
// another of its reads holds a replica connection goes to the writer at
// once (writer/community_share), answered in full; another community's read
// meanwhile is served by the replica; and the share comes back when the
// read ends. Red without the share: the nested read is served by the replica.
TEST_F(replica_faults, ACommunityHoldsAtMostItsShareOfReplicaConnections) {
  ctx_->replicas->max_leases_per_community = 1;
  int64_t other = 0;
  {
    auto conn = db_->connect();
    auto c = db::add_community(*conn, "faults-other.test", "other", community_policy::open);
    ASSERT_TRUE(c.has_value());
    other = c->id;
  }
  prove();
  const std::string writer_share =
    R"(waggle_route_decisions_total{path="history",decision="writer",reason="community_share"})";
  answer nested, elsewhere;
  bool once = false;
  ctx_->after_proof = [&](const std::string&) {
    if (once)
      return;
    once = true;  // the reads below run their own proofs; only the outer read nests
    nested = read(covered_read());
    elsewhere = read(read_until(other, now_ - 2000));
  };
  auto outer = read(covered_read());
  ctx_->after_proof = nullptr;
  ASSERT_TRUE(outer.answered && nested.answered && elsewhere.answered);
  EXPECT_EQ(outer.reply.raws.size(), 50u);
  EXPECT_EQ(nested.reply.raws.size(), 50u) << "the writer answers it in full";
  EXPECT_EQ(decisions(writer_share), 1u) << "the nested read of the same community";
  EXPECT_EQ(decisions(replica_covered), 2u) << "the outer read and the other community's";
  auto after = read(covered_read());
  EXPECT_EQ(after.reply.raws.size(), 50u);
  EXPECT_EQ(decisions(replica_covered), 3u) << "the share came back when the outer read ended";
}

// Issue 34 (two hostile communities holding every replica connection): one
// replica of 4 connections, a share of 2 and a reserve of 2 (the node's
// defaults for it). Reads of A and B pile up, each nested in the one before
// while it holds its connection: A takes 2, B its first; B's second goes to
// the writer at once (writer/community_reserve), and a third community's
// read, arriving last, still finds a replica connection. Red without the
// reserve (checked): B's second read takes the last connection and C's, read
// while B's holds it, waits out the acquire budget.
TEST_F(replica_faults, TwoBusyCommunitiesLeaveAReplicaConnectionToAThird) {
  db::replica_pool_options o;
  o.url = standby::url_for(db_->name());
  o.name = "reader-0";
  o.max_connections = 4;
  o.statement_timeout = std::chrono::milliseconds(statement_timeout_ms);
  auto four = std::make_shared<db::replica_pool>(o);
  ctx_->replicas = std::make_shared<replica_set>();
  ctx_->replicas->pools.push_back(four);
  ctx_->replicas->max_leases_per_community = 2;
  ctx_->replicas->reserved_connections = 2;
  int64_t b = 0, c = 0;
  {
    auto conn = db_->connect();
    auto made_b = db::add_community(*conn, "faults-b.test", "b", community_policy::open);
    auto made_c = db::add_community(*conn, "faults-c.test", "c", community_policy::open);
    ASSERT_TRUE(made_b.has_value() && made_c.has_value());
    b = made_b->id;
    c = made_c->id;
  }
  prove();
  const std::string writer_reserve =
    R"(waggle_route_decisions_total{path="history",decision="writer",reason="community_reserve"})";
  // The hook runs inside the innermost read served by the replica, holding its connection,
  // so each read below is nested in the one before. C is read inside B's second read when
  // that one holds a connection (without the reserve), else right after it.
  enum class who { a1, a2, b1, b2, c1 } current = who::a1;
  answer a2, b1, b2, c1;
  bool c_read = false;
  auto read_c = [&] {
    current = who::c1;
    c1 = read(read_until(c, now_ - 2000));
    c_read = true;
  };
  ctx_->after_proof = [&](const std::string&) {
    switch (current) {
      case who::a1: current = who::a2, a2 = read(covered_read()); break;
      case who::a2: current = who::b1, b1 = read(read_until(b, now_ - 2000)); break;
      case who::b1:
        current = who::b2;
        b2 = read(read_until(b, now_ - 2000));
        if (!c_read)
          read_c();
        break;
      case who::b2: read_c(); break;
      case who::c1: break;
    }
  };
  auto a1 = read(covered_read());
  ctx_->after_proof = nullptr;
  ASSERT_TRUE(a1.answered && a2.answered && b1.answered && b2.answered && c1.answered);
  EXPECT_EQ(a1.reply.raws.size(), 50u);
  EXPECT_EQ(a2.reply.raws.size(), 50u);
  EXPECT_TRUE(b2.reply.err.ok()) << "the writer answers it";
  EXPECT_EQ(decisions(writer_reserve), 1u) << "B's second read";
  EXPECT_EQ(decisions(replica_covered), 4u) << "A's two, B's first and C's";
  EXPECT_EQ(four->counters().acquire_timeouts.load(), 0u) << "C did not wait for a connection";
}

// Must-show 4: a VACUUM on the primary removes row versions the replica's
// snapshot still needs; replay waits max_standby_streaming_delay, then ends
// the replica's session. The page comes from the writer, whole.
TEST_F(replica_faults, ARecoveryConflictMidReadGivesTheWritersWholePage) {
  standby::restore_on_exit restore;
  prove();
  bool injected = false;
  ctx_->after_proof = [&](const std::string&) {
    injected = true;
    auto conn = db_->connect();
    pqxx::nontransaction tx(*conn);
    // New versions of every row: the old ones are dead on the primary but
    // are what the replica's snapshot sees.
    tx.exec("UPDATE events SET raw = raw WHERE community_id = " + std::to_string(community_));
    tx.exec("VACUUM events");
    // Replay reaches the cleanup record and, after the standby's delay,
    // cancels the session holding the snapshot; only then does it catch up.
    ASSERT_TRUE(standby::wait_replayed(db_->url(), 60s));
  };
  auto a = read(covered_read());
  ASSERT_TRUE(injected);
  ASSERT_TRUE(a.answered);
  ASSERT_TRUE(a.reply.err.ok()) << a.reply.err.message();
  EXPECT_EQ(a.reply.raws.size(), 50u);  // the whole page, from the writer
  EXPECT_EQ(decisions(writer_replica_error), 1u);
  EXPECT_EQ(decisions(replica_covered), 0u);
}

// Must-show 5: the replica's backend stops answering mid-transaction (SIGSTOP:
// its socket stays open, no error ever comes). statement_timeout cannot end
// it (a stopped backend runs no timer); the pool's watchdog does, and the
// writer answers. The whole read ends within statement_timeout + grace plus
// the writer's own read.
TEST_F(replica_faults, ABlackholedReaderMidTransactionIsAnsweredFromTheWriterInTime) {
  prove();
  std::unique_ptr<standby::stopped_backend> stopped;
  ctx_->after_proof = [&](const std::string& backend) {
    stopped = std::make_unique<standby::stopped_backend>(pid_of(backend));
    ASSERT_TRUE(stopped->stopped());
  };
  auto a = read(covered_read());
  stopped.reset();  // SIGCONT
  ASSERT_TRUE(a.answered);
  ASSERT_TRUE(a.reply.err.ok()) << a.reply.err.message();
  EXPECT_EQ(a.reply.raws.size(), 50u);
  EXPECT_EQ(decisions(writer_replica_error), 1u);
  EXPECT_GE(pool_->counters().watchdog_fired.load(), 1u);
  std::printf("[ figures  ] blackholed read answered from the writer after %.3f s "
              "(statement_timeout %.3f s + grace 0.150 s)\n",
              a.seconds, statement_timeout_ms / 1000.0);
  // A failure detector with room for the writer's read and the host's noise,
  // far below the hang it guards against.
  EXPECT_LT(a.seconds, statement_timeout_ms / 1000.0 + 0.150 + 2.0);
}

}  // namespace
}  // namespace waggle
