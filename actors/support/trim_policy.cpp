#include "actors/support/trim_policy.hpp"

#include <algorithm>

namespace waggle {

bool trim_policy::should_trim(std::size_t released, std::size_t free_held) {
  low_ = std::min(low_, free_held);
  if (released >= threshold_ || free_held >= low_ + threshold_)
    pending_ = 2;
  if (pending_ == 0)
    return false;
  --pending_;
  return true;
}

void trim_policy::trimmed(std::size_t free_held_after) { low_ = free_held_after; }

}  // namespace waggle
