#pragma once

// The CAF bus driver's registry worker (docs/bus.md, "CAF"): detached, on
// its own connection to PostgreSQL. Registers the node's bus address in
// bus_nodes, heartbeats it every `heartbeat`, deletes nodes silent for
// `node_ttl`, and every `refresh` tells the facade which peers are live.
// While the database is unreachable it retries each refresh; the facade
// keeps the links it has.

#include <memory>

#include <pqxx/connection>

#include "actors/bus/caf_bus_settings.hpp"
#include "actors/support/env.hpp"
#include "messages/interfaces.hpp"

namespace waggle {

struct caf_bus_registry_state {
  static inline const char* name = "caf_bus_registry";
  using ptr = caf_bus_registry_actor::stateful_pointer<caf_bus_registry_state>;
  ptr self = nullptr;
  caf_bus_settings settings;
  node_env env;
  caf_bus_actor facade;
  std::unique_ptr<pqxx::connection> conn;
  bool registered = false;
  steady_time last_heartbeat{};

  void refresh();
};

caf_bus_registry_actor::behavior_type caf_bus_registry_impl(caf_bus_registry_state::ptr self,
                                                            caf_bus_settings settings,
                                                            caf_bus_actor facade, node_env env);

}  // namespace waggle
