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

#include <gtest/gtest.h>
#include <pqxx/pqxx>

#include "actors/reads/heartbeat_ring.hpp"
#include "actors/reads/reader_session.hpp"
#include "actors/support/env.hpp"
#include "actors/support/metrics.hpp"
#include "db/community_store.hpp"
#include "db/heartbeat.hpp"
#include "db/migrate.hpp"
#include "db/replica_pool.hpp"
#include "messages/types.hpp"
#include "tests/support/pg_fixture.hpp"
#include "tests/support/standby.hpp"

namespace waggle {
namespace {

using namespace std::chrono_literals;

constexpr int rows = 120;
constexpr int64_t statement_timeout_ms = 1500;

int pid_of(const std::string& backend) {
  auto at = backend.rfind("pid=");
  return at == std::string::npos ? 0 : std::stoi(backend.substr(at + 4));
}

class replica_faults : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(standby::configured());
    ASSERT_TRUE(standby::make_healthy());
    db_ = std::make_unique<pgtest::scratch_database>("replica_faults");
    auto conn = db_->connect();
    ASSERT_TRUE(db::apply_migrations(*conn, db::embedded_migrations()).has_value());
    auto id = db::add_community(*conn, "faults.test", "Faults", community_policy::open);
    ASSERT_TRUE(id.has_value());
    community_ = id->id;
    // Old rows (inserted late: their community's watermark is about now), all
    // below the fence wall of any proof taken after this.
    now_ = pgtest::wall_now();
    pqxx::work tx(*conn);
    tx.exec("INSERT INTO events (community_id, id, pubkey, created_at, kind, raw) "
            "SELECT " + std::to_string(community_) + ", sha256(('fault' || i)::text::bytea), "
            "sha256('author'::bytea), " + std::to_string(now_ - 5000) + " - i, 1, "
            "'{\"n\":' || i || '}' FROM generate_series(1, " + std::to_string(rows) + ") AS i");
    tx.commit();
    writer_ = db_->connect();
    ASSERT_TRUE(pgtest::wait_past_late_marks(*writer_, community_));
    ASSERT_TRUE(standby::wait_replayed(db_->url()));

    db::replica_pool_options o;
    o.url = standby::url_for(db_->name());
    o.name = "reader-0";
    o.max_connections = 2;
    o.statement_timeout = std::chrono::milliseconds(statement_timeout_ms);
    o.watchdog_grace = 150ms;
    pool_ = std::make_shared<db::replica_pool>(o);
    ctx_ = std::make_shared<route_context>();
    ctx_->ring = ring_;
    ctx_->replicas = std::make_shared<replica_set>();
    ctx_->replicas->pools.push_back(pool_);
    ctx_->stats = stats_;
    ctx_->settings.acquire_budget = 2s;  // the first acquire opens the connection
    ctx_->settings.schema_version = db::embedded_migrations().back().version;
  }

  // What the prober does, once: a proof taken now, then replayed.
  void prove() {
    auto sampled = ring_entry::clock::now();
    auto p = db::probe_heartbeat(*writer_);
    ASSERT_TRUE(p.provable);
    ring_->push(p.epoch, ring_entry{p.token, p.fence_raw, p.floor_secs, sampled});
    ASSERT_TRUE(standby::wait_replayed(db_->url()));
  }

  history_request covered_read() const {
    proto::filter f;
    f.until = now_ - 2000;
    f.limit = 50;
    history_request req;
    req.community_id = community_;
    req.filters = {f};
    req.access.pubkeys = {std::string(64, 'a')};  // authenticated, in an open community
    return req;
  }

  struct answer {
    history_reply reply;
    bool answered = false;
    double seconds = 0;
  };
  answer read(const history_request& req) {
    caf::actor_system_config cfg;
    register_types(cfg);
    cfg.set("logger.verbosity", caf::atom("quiet"));
    caf::actor_system sys{cfg};
    auto env = node_env::production();
    auto session = sys.spawn<caf::detached>(reader_session_impl, db_->url(),
                                            std::string("reader-f"), proto::filter_limits{},
                                            statement_timeout_ms, env, ctx_);
    caf::scoped_actor self{sys};
    answer a;
    auto start = std::chrono::steady_clock::now();
    self->request(session, 30s, req)
      .receive([&](history_reply& r) { a.reply = std::move(r), a.answered = true; },
               [&](caf::error& e) { ADD_FAILURE() << "no reply: " << sys.render(e); });
    a.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    self->send_exit(session, caf::exit_reason::user_shutdown);
    return a;
  }

  uint64_t decisions(const std::string& reason_line) const {
    auto text = stats_->render();
    auto at = text.find(reason_line);
    if (at == std::string::npos)
      return 0;
    return std::stoull(text.substr(at + reason_line.size() + 1));
  }

  std::unique_ptr<pgtest::scratch_database> db_;
  std::unique_ptr<pqxx::connection> writer_;
  int64_t community_ = 0;
  int64_t now_ = 0;
  std::shared_ptr<heartbeat_ring> ring_ = std::make_shared<heartbeat_ring>();
  std::shared_ptr<metrics> stats_ = std::make_shared<metrics>();
  std::shared_ptr<db::replica_pool> pool_;
  std::shared_ptr<route_context> ctx_;
};

const std::string replica_covered =
  R"(waggle_route_decisions_total{path="history",decision="replica",reason="covered"})";
const std::string writer_replica_error =
  R"(waggle_route_decisions_total{path="history",decision="writer",reason="replica_error"})";

TEST_F(replica_faults, AHealthyStandbyServesTheCoveredPage) {
  prove();
  auto a = read(covered_read());
  ASSERT_TRUE(a.answered);
  ASSERT_TRUE(a.reply.err.ok()) << a.reply.err.message();
  EXPECT_EQ(a.reply.raws.size(), 50u);
  EXPECT_EQ(decisions(replica_covered), 1u);
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
