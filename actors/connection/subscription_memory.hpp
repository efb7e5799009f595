#pragma once

// What a subscription costs in memory, and the node-wide budget every
// connection charges it to (docs/protocol.md#limits, docs/operations.md).
// The per-connection budget is a plain sum in subscription_table; the
// node-wide one is this one counter, shared by all connection actors: the
// one piece of mutable state they share besides the metrics registry.

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#include "messages/proto/filter.hpp"

namespace waggle {

class memory_budget {
 public:
  explicit memory_budget(size_t limit) : limit_(limit) {}
  // Adds `bytes` unless that would pass the limit (0 = no limit).
  bool try_reserve(size_t bytes);
  void release(size_t bytes);
  size_t used() const { return used_.load(std::memory_order_relaxed); }
  size_t limit() const { return limit_; }
  // Bytes released since the last call (the node's trim timer asks).
  size_t take_released() { return released_.exchange(0, std::memory_order_relaxed); }

 private:
  const size_t limit_;
  std::atomic<size_t> used_{0};
  std::atomic<size_t> released_{0};
};

using memory_budget_ptr = std::shared_ptr<memory_budget>;

// The bytes a subscription with `filters` holds in the node while it lives:
// its filters in the fanout hub and the hub's index entries for them
// (measured, docs/operations.md "Subscription memory").
size_t subscription_bytes(const std::vector<proto::filter>& filters);

// Bytes held per id remembered from a history (subscription::history_ids).
constexpr size_t history_id_bytes = 32;
// Bytes held per history frame waiting for the socket to drain, besides its text.
constexpr size_t history_frame_overhead = 48;

// An event id as 32 bytes (history_ids keeps these, sorted).
using event_id_bin = std::array<uint8_t, 32>;
// False if `hex` is not 64 hex digits.
bool id_from_hex(std::string_view hex, event_id_bin& out);

}  // namespace waggle
