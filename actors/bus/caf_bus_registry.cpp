#include "actors/bus/caf_bus_registry.hpp"

#include "actors/support/log.hpp"
#include "db/bus_store.hpp"

namespace waggle {

void caf_bus_registry_state::refresh() {
  try {
    if (!conn) {
      conn = db::bus::open(settings.database_url, "registry", std::chrono::seconds{10});
      registered = false;
    }
    auto now = env.steady_now();
    if (!registered) {
      db::bus::register_node(*conn, db::bus::node_row{settings.node_id, settings.address,
                                                      settings.port, settings.protocol_version},
                             {});
      registered = true;
      last_heartbeat = now;
    } else if (now - last_heartbeat >= settings.heartbeat) {
      registered = db::bus::heartbeat(*conn, settings.node_id);
      last_heartbeat = now;
      if (!registered)  // a peer expired this node while it stalled
        return refresh();
    }
    db::bus::expire_nodes(*conn, settings.node_ttl);
    bus_peers peers;
    for (auto& n : db::bus::live_nodes(*conn, settings.node_id, settings.node_ttl))
      peers.live.push_back(bus_peer_info{std::move(n.node_id), std::move(n.address),
                                         static_cast<uint16_t>(n.port), n.protocol_version});
    self->send(facade, std::move(peers));
  } catch (const std::exception& e) {
    conn.reset();
    log::warn("bus", "registry unreachable; the links made stay", {{"error", e.what()}});
  }
}

caf_bus_registry_actor::behavior_type caf_bus_registry_impl(caf_bus_registry_state::ptr self,
                                                            caf_bus_settings settings,
                                                            caf_bus_actor facade, node_env env) {
  auto& st = self->state;
  st.self = self;
  st.settings = std::move(settings);
  st.facade = std::move(facade);
  st.env = std::move(env);
  self->link_to(st.facade);
  self->send(self, bus_tick{});
  return {
    [self](bus_tick) {
      self->state.refresh();
      self->delayed_send(self, self->state.settings.refresh, bus_tick{});
    },
  };
}

}  // namespace waggle
