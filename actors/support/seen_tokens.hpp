#pragma once

// NIP-98 tokens already used on this node (docs/protocol.md, "NIP-98"), by
// their signature (nip98_result::token_key). A
// token is good for `auth_window` seconds either side of its created_at, so
// a captured one could be sent again within that window (a NIP-86 ban undone
// and redone, a listener registered again); the relay remembers each token's
// id until it could no longer pass, and refuses it the second time. Shared by
// every HTTP actor of the node; one mutex around a hash map.

#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>

namespace waggle {

// What a replayed token is told (401, `auth-required:`).
inline constexpr const char* nip98_replayed_reason
  = "this Authorization token was already used; sign a new one";

class seen_tokens {
 public:
  enum class use { first, replayed, full };

  explicit seen_tokens(size_t capacity = 200000) : capacity_(capacity) {}

  // Records the token `id` (its key), good until `expires_at` (unix seconds). A table
  // full of live tokens refuses (fail closed: `full`) rather than forget one.
  use record(std::string_view id, int64_t expires_at, int64_t now);
  size_t size() const;

 private:
  void sweep(int64_t now);
  size_t capacity_;
  mutable std::mutex mtx_;
  std::unordered_map<std::string, int64_t> expiry_;  // id -> unix seconds
  int64_t next_sweep_ = 0;
};

}  // namespace waggle
