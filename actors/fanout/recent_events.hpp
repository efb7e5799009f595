#pragma once

// The events the hub fanned out most recently, by (community, id): in a
// cluster a local commit reaches the hub twice, from the node's own writer
// at once and from the cluster tail's read of the database, in either order;
// the second is dropped. A window of the last `capacity` events, not of
// time, so the hub reads no clock (a replay feeds it no readings): exactly
// once holds while the later copy comes within `capacity` events of the
// first (the tail runs milliseconds behind; 262,144 events are 26 s at
// 10,000 events/s).

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <unordered_set>
#include <vector>

namespace waggle {

class recent_events {
 public:
  explicit recent_events(size_t capacity = 262'144) : capacity_(capacity) {}

  // True the first time (community, id) is offered within the window; the
  // pair is then remembered. `id` is the event id in hex.
  bool first(int64_t community_id, std::string_view id);
  size_t size() const { return seen_.size(); }

 private:
  struct key {
    uint64_t hi = 0, lo = 0;
    bool operator==(const key& o) const { return hi == o.hi && lo == o.lo; }
  };
  struct key_hash {
    size_t operator()(const key& k) const { return k.hi ^ (k.lo * 0x9e3779b97f4a7c15ULL); }
  };
  static key key_of(int64_t community_id, std::string_view id);

  size_t capacity_;
  std::unordered_set<key, key_hash> seen_;
  std::vector<key> ring_;  // insertion order; the oldest at next_ once full
  size_t next_ = 0;
};

}  // namespace waggle
