#include "actors/reads/heartbeat_ring.hpp"

#include <algorithm>

namespace waggle {

const ring_entry* ring_snapshot::proof_for(int64_t token) const {
  auto it = std::upper_bound(entries.begin(), entries.end(), token,
                             [](int64_t t, const ring_entry& e) { return t < e.token; });
  return it == entries.begin() ? nullptr : &*std::prev(it);
}

std::shared_ptr<const ring_snapshot> heartbeat_ring::snapshot() const {
  std::lock_guard lock{mtx_};
  return current_;
}

heartbeat_ring::push_result heartbeat_ring::push(const std::string& epoch, const ring_entry& e) {
  std::lock_guard lock{mtx_};
  auto next = std::make_shared<ring_snapshot>();
  auto result = push_result::appended;
  if (current_->epoch != epoch) {
    result = push_result::epoch_changed;
  } else if (auto* newest = current_->newest(); newest && e.token <= newest->token) {
    next->epoch = epoch;
    current_ = std::move(next);
    return push_result::regression;
  } else {
    auto cutoff = e.sampled - window_;
    for (auto& old : current_->entries)
      if (old.sampled >= cutoff)
        next->entries.push_back(old);
  }
  next->epoch = epoch;
  next->entries.push_back(e);
  current_ = std::move(next);
  return result;
}

void heartbeat_ring::reset(const std::string& epoch) {
  auto next = std::make_shared<ring_snapshot>();
  next->epoch = epoch;
  std::lock_guard lock{mtx_};
  current_ = std::move(next);
}

}  // namespace waggle
