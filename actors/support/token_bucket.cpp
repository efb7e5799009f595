#include "actors/support/token_bucket.hpp"

#include <algorithm>

namespace waggle {

double token_bucket::tokens(bucket_clock::time_point now, const bucket_rate& rate) const {
  if (tokens_ < 0)
    return rate.burst;
  auto elapsed = std::chrono::duration<double>(now - last_).count();
  return std::min(rate.burst, tokens_ + std::max(0.0, elapsed) * rate.per_second);
}

bool token_bucket::take(double cost, bucket_clock::time_point now, const bucket_rate& rate) {
  if (rate.unlimited())
    return true;
  auto have = tokens(now, rate);
  // The refill is credited either way: a refused take must not lose time.
  tokens_ = have;
  last_ = std::max(last_, now);
  if (have < cost)
    return false;
  tokens_ = have - cost;
  return true;
}

bool token_bucket::full(bucket_clock::time_point now, const bucket_rate& rate) const {
  return tokens(now, rate) >= rate.burst;
}

bool keyed_buckets::take_all(const std::vector<std::string>& keys, double cost,
                             bucket_clock::time_point now) {
  if (rate_.unlimited() || keys.empty())
    return true;
  std::lock_guard guard{mtx_};
  for (const auto& k : keys) {
    auto i = buckets_.find(k);
    if (i != buckets_.end() && i->second.tokens(now, rate_) < cost)
      return false;
    if (i == buckets_.end() && rate_.burst < cost)
      return false;
  }
  for (const auto& k : keys)
    buckets_[k].take(cost, now, rate_);
  if (buckets_.size() >= next_sweep_)
    sweep(now);
  return true;
}

void keyed_buckets::sweep(bucket_clock::time_point now) {
  std::erase_if(buckets_, [&](const auto& kv) { return kv.second.full(now, rate_); });
  // Sweep again when the table has doubled: amortised O(1) per take.
  next_sweep_ = std::max<size_t>(1024, 2 * buckets_.size());
}

size_t keyed_buckets::size() const {
  std::lock_guard guard{mtx_};
  return buckets_.size();
}

}  // namespace waggle
