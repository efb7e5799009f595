#pragma once

// The node's own messages: its drain, its supervisor's restarts and the
// timers of its detached maintenance actors. Each struct's `inspect` is
// beside it; the type IDs are in messages/type_ids.hpp.

#include <cstdint>

#include <caf/meta/type_name.hpp>

namespace waggle {

// Node -> connection actors on SIGTERM: answer what is in flight, then close 1001.
struct drain_request {};
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, drain_request&) {
  return f(caf::meta::type_name("drain_request"));
}

// Directory/health timer tick (a typed input so traces can record it).
struct refresh_tick {};
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, refresh_tick&) {
  return f(caf::meta::type_name("refresh_tick"));
}

// Expiration reaper timer (NIP-40): delete the events that have expired.
struct expiry_tick {};
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, expiry_tick&) {
  return f(caf::meta::type_name("expiry_tick"));
}

// The heartbeat prober's timer (docs/replicas.md).
struct heartbeat_tick {};
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, heartbeat_tick&) {
  return f(caf::meta::type_name("heartbeat_tick"));
}

// Node supervisor -> itself: restart a child after its backoff.
struct restart_child {
  uint8_t which = 0;
};
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, restart_child& x) {
  return f(caf::meta::type_name("restart_child"), x.which);
}

}  // namespace waggle
