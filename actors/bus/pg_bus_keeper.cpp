#include "actors/bus/pg_bus_keeper.hpp"

#include "actors/support/log.hpp"

namespace waggle {

void bus_keeper_state::keep() {
  try {
    if (!conn)
      conn = db::bus::open(settings.database_url, "keeper", settings.statement_timeout);
    auto heartbeat_if_due = [this] {
      auto now = env.steady_now();
      if (now - last_heartbeat < settings.heartbeat)
        return;
      if (!db::bus::heartbeat(*conn, settings.node_id))
        self->send(fetcher, bus_tick{1});
      last_heartbeat = now;
    };
    heartbeat_if_due();
    db::bus::expire_nodes(*conn, settings.node_ttl);
    // A few batches a pass, within a second: a backlog shrinks over passes,
    // and no pass holds the connection long or delays the heartbeat (a node
    // whose heartbeat waited on garbage could be expired by its peers).
    const auto start = env.steady_now();
    for (int i = 0; i < 10 && env.steady_now() - start < std::chrono::seconds{1}; ++i) {
      if (db::bus::collect_garbage(*conn, settings.retention, settings.gc_batch)
          < settings.gc_batch)
        break;
      heartbeat_if_due();
    }
  } catch (const std::exception& e) {
    conn.reset();
    log::warn("bus", "keeper: registry or garbage collection failed", {{"error", e.what()}});
  }
}

bus_keeper_actor::behavior_type bus_keeper_impl(bus_keeper_state::ptr self,
                                                pg_bus_settings settings,
                                                bus_fetcher_actor fetcher, node_env env) {
  auto& st = self->state;
  st.self = self;
  st.settings = std::move(settings);
  st.fetcher = std::move(fetcher);
  st.env = std::move(env);
  self->send(self, bus_tick{});
  return {
    [self](bus_tick) {
      self->state.keep();
      self->delayed_send(self, self->state.settings.maintenance, bus_tick{});
    },
  };
}

}  // namespace waggle
