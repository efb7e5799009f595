#pragma once

// Token buckets for read admission (docs/protocol.md, "Read limits"): one per
// connection, held by its actor, and the per-pubkey and per-address ones that
// every connection of the node shares (keyed_buckets). Time is passed in, so
// the arithmetic is tested with a made-up clock.

#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

namespace waggle {

using bucket_clock = std::chrono::steady_clock;

struct bucket_rate {
  double per_second = 0;  // refill; 0 = unlimited (the bucket never refuses)
  double burst = 0;       // capacity; a fresh bucket is full
  bool unlimited() const { return per_second <= 0 || burst <= 0; }
};

class token_bucket {
 public:
  // Takes `cost` tokens if the bucket holds them after refilling up to `now`;
  // a refused take takes nothing. A cost above the burst is never admitted.
  bool take(double cost, bucket_clock::time_point now, const bucket_rate& rate);
  // Whether, at `now`, the bucket has refilled to its burst (then it is the
  // same as a fresh one and may be forgotten).
  bool full(bucket_clock::time_point now, const bucket_rate& rate) const;
  double tokens(bucket_clock::time_point now, const bucket_rate& rate) const;

 private:
  double tokens_ = -1;  // < 0: never used, full
  bucket_clock::time_point last_{};
};

// Buckets by key (a pubkey, an address), shared by every connection of the
// node: one mutex around a small map, held for a few arithmetic operations.
// A bucket that has refilled is forgotten when the table is swept (it equals
// a fresh one), so the table holds only the keys active within the last
// burst/rate seconds.
class keyed_buckets {
 public:
  explicit keyed_buckets(bucket_rate rate) : rate_(rate) {}
  // Takes `cost` from every key's bucket, or from none if one cannot pay.
  bool take_all(const std::vector<std::string>& keys, double cost, bucket_clock::time_point now);
  size_t size() const;
  const bucket_rate& rate() const { return rate_; }

 private:
  void sweep(bucket_clock::time_point now);
  bucket_rate rate_;
  mutable std::mutex mtx_;
  std::unordered_map<std::string, token_bucket> buckets_;
  size_t next_sweep_ = 1024;
};

// The node's shared read buckets (null in actor tests and replays, where
// only the connection's own bucket applies).
struct shared_read_buckets {
  keyed_buckets by_pubkey;
  keyed_buckets by_address;
  shared_read_buckets(bucket_rate pubkey, bucket_rate address)
    : by_pubkey(pubkey), by_address(address) {}
};

}  // namespace waggle
