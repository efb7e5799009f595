#include "actors/node/node_replicas.hpp"

#include <algorithm>

#include "actors/support/log.hpp"
#include "actors/support/metrics.hpp"
#include "db/migrate.hpp"
#include "db/replica_pool.hpp"

namespace waggle {

std::shared_ptr<route_context> make_routing(const node_config& cfg, const node_env& env,
                                            std::shared_ptr<heartbeat_ring> ring) {
  auto ctx = std::make_shared<route_context>();
  ctx->ring = std::move(ring);
  ctx->stats = env.stats;
  ctx->settings.max_age = std::chrono::milliseconds(cfg.replica_read_max_age_ms);
  ctx->settings.stale_after = std::chrono::milliseconds(cfg.heartbeat_stale_ms);
  ctx->settings.acquire_budget = std::chrono::milliseconds(cfg.replica_acquire_budget_ms);
  auto& all = db::embedded_migrations();
  ctx->settings.schema_version = all.empty() ? 0 : all.back().version;
  ctx->replicas = std::make_shared<replica_set>();
  for (size_t i = 0; i < cfg.read_database_urls.size(); ++i) {
    db::replica_pool_options o;
    o.url = cfg.read_database_urls[i];
    o.name = "reader-" + std::to_string(i);
    o.max_connections = cfg.replica_pool_size;
    o.statement_timeout = std::chrono::milliseconds(cfg.read_statement_timeout_ms);
    o.watchdog_grace = std::chrono::milliseconds(cfg.replica_acquire_budget_ms);
    o.report = log::session_report;
    auto pool = std::make_shared<db::replica_pool>(std::move(o));
    if (env.stats)
      env.stats->add_replica_pool(pool);
    ctx->replicas->pools.push_back(std::move(pool));
  }
  // One community's reads hold at most this many replica connections, and
  // communities already reading there leave the reserve to the others: busy
  // clients of one or two communities cannot take every connection.
  const size_t half = std::max<size_t>(1, cfg.read_database_urls.size() * cfg.replica_pool_size / 2);
  ctx->replicas->max_leases_per_community =
    cfg.replica_leases_per_community > 0 ? cfg.replica_leases_per_community : half;
  ctx->replicas->reserved_connections =
    cfg.replica_reserved_connections >= 0
      ? static_cast<size_t>(cfg.replica_reserved_connections)
      : half;
  if (!cfg.read_database_urls.empty() && cfg.created_at_window + 60 > 960)
    log::warn("replicas",
              "created_at_window leaves no room below the commit floor (960 s): most events "
              "count as late and covered replica reads will mostly go to the writer",
              {{"created_at_window", std::to_string(cfg.created_at_window)}});
  return ctx;
}

}  // namespace waggle
