#pragma once

// A reader session routed to the run's streaming standby, driven one read at a
// time, with the prober's work done by hand (prove): the fixture of the
// replica fault tests and of the replica red team. A scratch database with
// one open community and `rows` old kind-1 rows, a pool of two connections to
// its copy on the standby, a ring and the route's metrics.

#include <chrono>
#include <cstdio>
#include <memory>
#include <string>

#include <gtest/gtest.h>
#include <pqxx/pqxx>

#include "actors/reads/heartbeat_ring.hpp"
#include "actors/reads/reader_session.hpp"
#include "actors/reads/replica_route.hpp"
#include "actors/support/env.hpp"
#include "actors/support/metrics.hpp"
#include "db/community_store.hpp"
#include "db/heartbeat.hpp"
#include "db/migrate.hpp"
#include "db/replica_pool.hpp"
#include "messages/register_types.hpp"
#include "tests/support/pg_fixture.hpp"
#include "tests/support/standby.hpp"

namespace waggle::replica_test {

using namespace std::chrono_literals;

constexpr int rows = 120;
constexpr int64_t statement_timeout_ms = 1500;

inline const std::string replica_covered =
  R"(waggle_route_decisions_total{path="history",decision="replica",reason="covered"})";
inline const std::string writer_replica_error =
  R"(waggle_route_decisions_total{path="history",decision="writer",reason="replica_error"})";

class replica_route_fixture : public ::testing::Test {
 protected:
  // `purpose` names the scratch database and the community's host.
  explicit replica_route_fixture(std::string purpose) : purpose_(std::move(purpose)) {}

  void SetUp() override {
    ASSERT_TRUE(standby::configured());
    ASSERT_TRUE(standby::make_healthy());
    db_ = std::make_unique<pgtest::scratch_database>(
      purpose_, pgtest::scratch_database::content::migrated);
    auto conn = db_->connect();
    ASSERT_TRUE(db::apply_migrations(*conn, db::embedded_migrations()).has_value());
    auto id = db::add_community(*conn, purpose_ + ".test", purpose_, community_policy::open);
    ASSERT_TRUE(id.has_value());
    community_ = id->id;
    // Old rows, inserted late: the community's watermark is about now, and
    // every row is below the fence wall of a proof taken once the database
    // clock has passed it.
    now_ = pgtest::wall_now();
    pqxx::work tx(*conn);
    tx.exec("INSERT INTO events (community_id, id, pubkey, created_at, kind, raw) "
            "SELECT " + std::to_string(community_) + ", sha256(('" + purpose_ +
            "' || i)::text::bytea), sha256('author'::bytea), " + std::to_string(now_ - 5000) +
            " - i, 1, '{\"n\":' || i || '}' FROM generate_series(1, " + std::to_string(rows) +
            ") AS i");
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

  // What the prober does, once: a proof taken now, then replayed. An
  // unprovable probe is not pushed (the prober's rule) unless the test
  // requires one.
  void prove(bool require_provable = true) {
    auto sampled = ring_entry::clock::now();
    auto p = db::probe_heartbeat(*writer_);
    fence_wall_ = p.fence_raw - static_cast<double>(p.floor_secs);
    if (!require_provable && !p.provable) {
      std::printf("[ observed ] the probe is not provable: nothing pushed\n");
    } else {
      ASSERT_TRUE(p.provable);
      ring_->push(p.epoch, ring_entry{p.token, p.fence_raw, p.floor_secs, sampled});
    }
    ASSERT_TRUE(standby::wait_replayed(db_->url()));
  }

  // The newest page of kind-1 rows up to `until`, as an authenticated
  // reader of an open community asks for it.
  history_request read_until(int64_t community, int64_t until) const {
    proto::filter f;
    f.until = until;
    f.limit = 50;
    history_request req;
    req.community_id = community;
    req.filters = {f};
    req.access.pubkeys = {std::string(64, 'a')};
    return req;
  }
  history_request covered_read() const { return read_until(community_, now_ - 2000); }

  struct answer {
    history_reply reply;
    bool answered = false;
    double seconds = 0;
  };
  // One read by a fresh reader session, routed by `routing` (null: the
  // writer only).
  answer read(const history_request& req, std::shared_ptr<route_context> routing) {
    caf::actor_system_config cfg;
    register_types(cfg);
    cfg.set("logger.verbosity", caf::atom("quiet"));
    caf::actor_system sys{cfg};
    auto env = node_env::production();
    auto session = sys.spawn<caf::detached>(reader_session_actor_impl, db_->url(),
                                            "reader-" + purpose_, proto::filter_limits{},
                                            statement_timeout_ms, env, std::move(routing));
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
  answer read(const history_request& req) { return read(req, ctx_); }

  uint64_t decisions(const std::string& reason_line) const {
    auto text = stats_->render();
    auto at = text.find(reason_line);
    if (at == std::string::npos)
      return 0;
    return std::stoull(text.substr(at + reason_line.size() + 1));
  }

  std::string purpose_;
  std::unique_ptr<pgtest::scratch_database> db_;
  std::unique_ptr<pqxx::connection> writer_;
  int64_t community_ = 0;
  int64_t now_ = 0;
  double fence_wall_ = 0;
  std::shared_ptr<heartbeat_ring> ring_ = std::make_shared<heartbeat_ring>();
  std::shared_ptr<metrics> stats_ = std::make_shared<metrics>();
  std::shared_ptr<db::replica_pool> pool_;
  std::shared_ptr<route_context> ctx_;
};

}  // namespace waggle::replica_test
