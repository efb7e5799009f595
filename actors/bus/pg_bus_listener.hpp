#pragma once

// The PostgreSQL bus driver's listener (docs/bus.md, "Listening"): the one
// actor that LISTENs and UNLISTENs, on a dedicated connection. It holds the
// set of shards the fetcher wants and makes the connection's channels equal
// to it after every change and every reconnect, then has the fetcher read
// the shards it just LISTENed (a NOTIFY sent before the LISTEN is lost).
// Detached: a step blocks up to `listen_wait` for notifications, then it
// sends itself the next bus_tick.

#include <set>

#include "actors/bus/pg_bus_settings.hpp"
#include "actors/support/env.hpp"
#include "db/listen_connection.hpp"
#include "messages/interfaces.hpp"

namespace waggle {

struct bus_listener_state {
  static inline const char* name = "bus_listener";
  using ptr = bus_listener_actor::stateful_pointer<bus_listener_state>;
  ptr self = nullptr;
  pg_bus_settings settings;
  node_env env;
  bus_fetcher_actor fetcher;
  std::unique_ptr<db::listen_connection> listen;
  std::set<int32_t> wanted;
  steady_time next_connect{};
  std::chrono::milliseconds backoff{0};

  void want(const std::vector<int32_t>& shards);
  void step();
  caf::result<bus_shards> listening();

 private:
  void drop(const std::string& why);
  std::vector<std::string> channels() const;
};

bus_listener_actor::behavior_type bus_listener_impl(bus_listener_state::ptr self,
                                                    pg_bus_settings settings,
                                                    bus_fetcher_actor fetcher, node_env env);

}  // namespace waggle
