#include "actors/support/seen_tokens.hpp"

#include <iterator>

namespace waggle {

seen_tokens::use seen_tokens::record(std::string_view id, int64_t expires_at, int64_t now) {
  std::lock_guard guard{mtx_};
  if (now >= next_sweep_ || expiry_.size() >= capacity_)
    sweep(now);
  if (auto i = expiry_.find(std::string{id}); i != expiry_.end()) {
    if (i->second >= now)
      return use::replayed;
    expiry_.erase(i);  // expired: it cannot pass verification any more anyway
  }
  if (expiry_.size() >= capacity_)
    return use::full;
  expiry_.emplace(std::string{id}, expires_at);
  return use::first;
}

size_t seen_tokens::size() const {
  std::lock_guard guard{mtx_};
  return expiry_.size();
}

void seen_tokens::sweep(int64_t now) {
  for (auto i = expiry_.begin(); i != expiry_.end();)
    i = i->second < now ? expiry_.erase(i) : std::next(i);
  next_sweep_ = now + 10;
}

}  // namespace waggle
