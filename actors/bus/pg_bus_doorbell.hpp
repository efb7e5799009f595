#pragma once

// The PostgreSQL bus driver's doorbell (docs/bus.md, "The doorbell"):
// detached, on a connection of its own (never the publisher's or any pool's,
// so a busy pool cannot delay a wake-up). Per shard at most one NOTIFY per
// window: a shard marked dirty rings at once when its last ring is a window
// old (leading edge), else when the window ends (trailing edge, which always
// comes). Every shard due rings in one statement. Payload-free: the fetchers
// read the table.

#include <array>
#include <memory>
#include <set>

#include <pqxx/connection>

#include "actors/bus/pg_bus_settings.hpp"
#include "actors/support/env.hpp"
#include "messages/interfaces.hpp"

namespace waggle {

struct bus_doorbell_state {
  static inline const char* name = "bus_doorbell";
  using ptr = bus_doorbell_actor::stateful_pointer<bus_doorbell_state>;
  ptr self = nullptr;
  pg_bus_settings settings;
  node_env env;
  std::unique_ptr<pqxx::connection> conn;
  std::array<steady_time, bus_shard_count> last_rung{};
  std::set<int32_t> dirty;
  bool trailing_scheduled = false;
  // After a failed ring the shards stay dirty and ring again once this
  // passes (backing off while the database is down).
  steady_time retry_at{};
  std::chrono::milliseconds backoff{0};

  void mark(const std::vector<int32_t>& shards);
  void ring_due();
};

bus_doorbell_actor::behavior_type bus_doorbell_impl(bus_doorbell_state::ptr self,
                                                    pg_bus_settings settings, node_env env);

}  // namespace waggle
