#pragma once

// The node's presence on the bus (actors/bus/bus_probe.hpp, docs/bus.md,
// "The node on the bus"): its two timers. Each carries the probe it is
// about, so a tick or deadline that a replay feeds at its record names the
// same probe the live one did.

#include <cstdint>

#include <caf/meta/type_name.hpp>

namespace waggle {

// The probe's timer: publish probe `n` on the node's probe subject.
struct bus_probe_tick {
  uint64_t n = 0;
};
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, bus_probe_tick& x) {
  return f(caf::meta::type_name("bus_probe_tick"), x.n);
}

// Probe `n`'s deadline: not back by now, it is lost.
struct bus_probe_deadline {
  uint64_t n = 0;
};
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, bus_probe_deadline& x) {
  return f(caf::meta::type_name("bus_probe_deadline"), x.n);
}

}  // namespace waggle
