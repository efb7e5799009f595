#include "actors/fanout/recent_events.hpp"

namespace waggle {

namespace {

uint64_t hex_word(std::string_view hex) {
  uint64_t v = 0;
  for (char c : hex) {
    uint64_t d = (c >= '0' && c <= '9')   ? uint64_t(c - '0')
                 : (c >= 'a' && c <= 'f') ? uint64_t(c - 'a' + 10)
                 : (c >= 'A' && c <= 'F') ? uint64_t(c - 'A' + 10)
                                          : 0;
    v = (v << 4) | d;
  }
  return v;
}

}  // namespace

// An event id is a SHA-256: its first 128 bits are as good as all of them
// for telling recent events apart, and nobody can choose them.
recent_events::key recent_events::key_of(int64_t community_id, std::string_view id) {
  key k;
  k.hi = hex_word(id.substr(0, 16)) ^ static_cast<uint64_t>(community_id);
  k.lo = hex_word(id.substr(std::min<size_t>(16, id.size()), 16));
  return k;
}

bool recent_events::first(int64_t community_id, std::string_view id) {
  auto k = key_of(community_id, id);
  if (!seen_.insert(k).second)
    return false;
  if (ring_.size() < capacity_) {
    ring_.push_back(k);
  } else {
    seen_.erase(ring_[next_]);
    ring_[next_] = k;
    next_ = (next_ + 1) % capacity_;
  }
  return true;
}

}  // namespace waggle
