// The replica routing part of GET /metrics (docs/replicas.md, "Metrics").

#include <chrono>
#include <ostream>

#include "actors/support/metrics.hpp"
#include "db/replica_pool.hpp"

namespace waggle {

void metrics::count_route(std::string_view path, bool replica, std::string_view reason) {
  std::lock_guard guard{mtx_};
  auto key = std::make_tuple(std::string{path}, replica, std::string{reason});
  ++routes_[key];
}

void metrics::add_replica_pool(std::shared_ptr<const db::replica_pool> pool) {
  std::lock_guard guard{mtx_};
  pools_.push_back(std::move(pool));
}

void metrics::render_replicas(std::ostream& out) const {
  out << "# HELP waggle_route_decisions_total Routed reads (history, count, search) by where "
         "they ran and why.\n# TYPE waggle_route_decisions_total counter\n";
  std::lock_guard guard{mtx_};
  for (auto& [key, n] : routes_) {
    auto& [path, replica, reason] = key;
    out << "waggle_route_decisions_total{path=\"" << path << "\",decision=\""
        << (replica ? "replica" : "writer") << "\",reason=\"" << reason << "\"} " << n << '\n';
  }
  auto newest = heartbeat_newest_ns.load();
  double age = -1;
  if (newest != 0) {
    auto now = std::chrono::steady_clock::now().time_since_epoch().count();
    age = static_cast<double>(now - newest) / 1e9;
  }
  out << "# HELP waggle_replica_heartbeat_age_seconds Age of the newest replica freshness proof "
         "(-1: none).\n# TYPE waggle_replica_heartbeat_age_seconds gauge\n"
      << "waggle_replica_heartbeat_age_seconds " << age << '\n';
  out << "# HELP waggle_replica_epoch_rotations_total Heartbeat epochs rotated after a token "
         "regression.\n# TYPE waggle_replica_epoch_rotations_total counter\n"
      << "waggle_replica_epoch_rotations_total " << heartbeat_epoch_rotations.load() << '\n';
  if (pools_.empty())
    return;
  auto each = [&](const char* name, const char* type, const char* help, auto value) {
    out << "# HELP " << name << ' ' << help << "\n# TYPE " << name << ' ' << type << '\n';
    for (auto& p : pools_)
      out << name << "{reader=\"" << p->name() << "\"} " << value(*p) << '\n';
  };
  out << "# HELP waggle_replica_pool_connections Open replica connections, idle or leased.\n"
         "# TYPE waggle_replica_pool_connections gauge\n";
  for (auto& p : pools_) {
    out << "waggle_replica_pool_connections{reader=\"" << p->name() << "\",state=\"idle\"} "
        << p->counters().idle.load() << '\n';
    out << "waggle_replica_pool_connections{reader=\"" << p->name() << "\",state=\"active\"} "
        << p->counters().active.load() << '\n';
  }
  using pool = db::replica_pool;
  each("waggle_replica_pool_max", "gauge", "Replica connections allowed per pool.",
       [](const pool& p) { return p.max_connections(); });
  each("waggle_replica_acquire_attempts_total", "counter",
       "Replica connection acquires (one per routed read that reached a replica).",
       [](const pool& p) { return p.counters().acquire_attempts.load(); });
  each("waggle_replica_acquire_timeouts_total", "counter",
       "Acquires that found no replica connection within the budget.",
       [](const pool& p) { return p.counters().acquire_timeouts.load(); });
  each("waggle_replica_connect_failures_total", "counter", "Failed replica connects.",
       [](const pool& p) { return p.counters().connect_failures.load(); });
  each("waggle_replica_watchdog_fired_total", "counter",
       "Replica reads whose socket the watchdog shut after statement_timeout plus grace.",
       [](const pool& p) { return p.counters().watchdog_fired.load(); });
}

}  // namespace waggle
