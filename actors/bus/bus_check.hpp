#pragma once

// What every bus driver does first with a publish, subscribe or request
// (docs/bus.md, "Errors"): validate it, and count a refusal under its
// bus_errc's name, so that all drivers refuse and count alike.

#include <caf/error.hpp>

#include "actors/support/env.hpp"
#include "messages/bus.hpp"

namespace waggle {

inline caf::error bus_refuse(const node_env& env, caf::error err) {
  if (err && env.stats)
    env.stats->bus.count_refused(err);
  return err;
}

template <class Input>
caf::error bus_check(const node_env& env, const Input& x) {
  return bus_refuse(env, bus_validate(x));
}

}  // namespace waggle
