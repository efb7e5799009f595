#pragma once

// Time and randomness reach actors only through this struct, so a test (or a
// trace replay) can make both exact. Production uses the system clocks and
// OpenSSL's RAND_bytes. Each actor holds its own copy, named after it
// (for_actor): while a trace is recorded, every reading is written down under
// that name, and a replay answers each reading from the trace instead.

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "actors/support/metrics.hpp"

namespace waggle {

class trace_port;

using steady_time = std::chrono::steady_clock::time_point;

struct env_sources {
  std::function<int64_t()> unix_now;              // wall clock, seconds
  std::function<std::string()> random_challenge;  // NIP-42 challenges (hex)
  std::function<steady_time()> steady_now;        // monotonic, for decisions (commit delay)
};

struct node_env {
  env_sources sources;
  std::shared_ptr<waggle::metrics> stats;
  // Null unless a trace is being recorded (or replayed): see docs/traces.md.
  std::shared_ptr<trace_port> trace;
  // Whose readings these are, in a trace ("ingest", "conn-3", ...).
  std::string actor = "node";

  int64_t unix_now() const;
  std::string random_challenge() const;
  steady_time steady_now() const;

  node_env for_actor(std::string name) const {
    auto copy = *this;
    copy.actor = std::move(name);
    return copy;
  }

  static node_env production();
};

}  // namespace waggle
