#include "actors/support/trim_policy.hpp"

#include <algorithm>

namespace waggle {

bool trim_policy::should_trim(std::size_t released, std::size_t free_held) {
  low_ = std::min(low_, free_held);
  ++since_trim_;
  if (released >= threshold_ || free_held >= low_ + threshold_)
    pending_ = looks_per_trim;
  else if (pending_ == 0 && since_trim_ >= looks_per_idle_trim && free_held >= threshold_)
    pending_ = 1;
  if (pending_ == 0)
    return false;
  --pending_;
  since_trim_ = 0;
  return true;
}

void trim_policy::trimmed(std::size_t free_held_after) { low_ = free_held_after; }

}  // namespace waggle
