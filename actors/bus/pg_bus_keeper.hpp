#pragma once

// The PostgreSQL bus driver's keeper (docs/bus.md, "Registry and garbage"):
// detached, on its own connection. Every `maintenance` it heartbeats the
// node's registry row (at most every `heartbeat`), deletes nodes silent for
// `node_ttl` (their subscriptions go with them) and deletes messages older
// than `retention`, oldest first by the published_at index, a bounded
// batch at a time. A heartbeat that finds the node's row gone (a peer
// expired it while this node stalled) has the fetcher register it again.

#include <memory>

#include <pqxx/connection>

#include "actors/bus/pg_bus_settings.hpp"
#include "actors/support/env.hpp"
#include "messages/interfaces.hpp"

namespace waggle {

struct bus_keeper_state {
  static inline const char* name = "bus_keeper";
  using ptr = bus_keeper_actor::stateful_pointer<bus_keeper_state>;
  ptr self = nullptr;
  pg_bus_settings settings;
  node_env env;
  bus_fetcher_actor fetcher;
  std::unique_ptr<pqxx::connection> conn;
  steady_time last_heartbeat{};

  void keep();
};

bus_keeper_actor::behavior_type bus_keeper_impl(bus_keeper_state::ptr self,
                                                pg_bus_settings settings,
                                                bus_fetcher_actor fetcher, node_env env);

}  // namespace waggle
