#pragma once

// The unauthenticated WebSockets, oldest first, so that an upgrade arriving
// at the unauthenticated cap can evict the oldest of them instead of being
// refused: a flood from many addresses then rotates through the cap and a
// client that AUTHs promptly still gets in (docs/operations.md,
// "Connections"). Sessions are held weakly; one that ends without leaving
// (it never authenticated) is dropped when met, or by a sweep. A template
// over the session type so tests/gateway can drive it without sockets.

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <unordered_map>

namespace waggle::gateway {

template <class T>
class unauth_queue {
 public:
  using clock = std::chrono::steady_clock;

  // `key` joins as the youngest (a key seen before starts over: the address
  // of a destroyed session can be reused by a new one).
  void add(const T* key, std::weak_ptr<T> session, clock::time_point now = clock::now()) {
    std::lock_guard lock{mtx_};
    if (++adds_since_sweep_ > sweep_after_) {
      adds_since_sweep_ = 0;
      sweep();
      sweep_after_ = std::max<std::size_t>(1024, order_.size());
    }
    erase_key(key);
    const uint64_t seq = next_++;
    order_.emplace(seq, entry{key, now, std::move(session)});
    seq_of_[key] = seq;
  }

  // `key` authenticated (or is going): no longer a candidate.
  void remove(const T* key) {
    std::lock_guard lock{mtx_};
    erase_key(key);
  }

  // Takes out the oldest live session that joined at or before `cutoff`;
  // empty when there is none (every one is younger).
  std::weak_ptr<T> take_oldest(clock::time_point cutoff) {
    std::lock_guard lock{mtx_};
    while (!order_.empty()) {
      auto it = order_.begin();
      if (!it->second.session.expired() && it->second.since > cutoff)
        return {};
      auto session = std::move(it->second.session);
      forget(it);
      if (!session.expired())
        return session;
    }
    return {};
  }

  std::size_t size() const {
    std::lock_guard lock{mtx_};
    return order_.size();
  }

 private:
  struct entry {
    const T* key;
    clock::time_point since;
    std::weak_ptr<T> session;
  };
  using order_map = std::map<uint64_t, entry>;

  void forget(typename order_map::iterator it) {
    if (auto s = seq_of_.find(it->second.key); s != seq_of_.end() && s->second == it->first)
      seq_of_.erase(s);
    order_.erase(it);
  }
  void erase_key(const T* key) {
    auto s = seq_of_.find(key);
    if (s == seq_of_.end())
      return;
    order_.erase(s->second);
    seq_of_.erase(s);
  }
  // Sessions destroyed without authenticating never call remove().
  void sweep() {
    for (auto it = order_.begin(); it != order_.end();) {
      auto next = std::next(it);
      if (it->second.session.expired())
        forget(it);
      it = next;
    }
  }

  mutable std::mutex mtx_;
  uint64_t next_ = 0;
  order_map order_;
  std::unordered_map<const T*, uint64_t> seq_of_;
  std::size_t adds_since_sweep_ = 0;
  std::size_t sweep_after_ = 1024;
};

}  // namespace waggle::gateway
