#pragma once

// Time and randomness reach actors only through this struct, so a test (or a
// trace replay) can make both exact. Production uses the system clock and
// OpenSSL's RAND_bytes.

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "actors/metrics.hpp"

namespace waggle {

struct node_env {
  std::function<int64_t()> unix_now;              // wall clock, seconds
  std::function<std::string()> random_challenge;  // NIP-42 challenges (hex)
  std::shared_ptr<waggle::metrics> stats;

  static node_env production();
};

}  // namespace waggle
