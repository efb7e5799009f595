#pragma once

// NIP-11: the relay information document a community's Host serves to
// `Accept: application/nostr+json`. Pure: the node fills in the values (its
// settings, the community's own text over its defaults), this renders them.

#include <cstddef>
#include <cstdint>
#include <string>

namespace waggle::proto {

// The software version a node gives: NIP-11 and its answers to bus pings.
inline constexpr const char* software_version = "0.1.0";

struct relay_info {
  std::string name;
  std::string description;
  std::string icon;     // omitted when empty
  std::string pubkey;   // the relay's key (64 hex)
  bool nip43 = false;   // NIP-43 join requests: offered by closed communities only
  bool search = false;  // NIP-50
  bool negentropy = false;  // NIP-77
  size_t max_message_length = 0;
  size_t max_subscriptions = 0;
  size_t max_filters = 0;
  uint32_t max_limit = 0;
  uint32_t default_limit = 0;
  size_t max_subscription_bytes = 0;
  size_t max_subscription_bytes_total = 0;
  size_t max_history_bytes_per_connection = 0;
  size_t max_auth_keys = 0;
  int64_t created_at_window = 0;  // both created_at limits
  size_t max_reads_in_flight = 0;
  int64_t read_tokens_per_second = 0;
  int64_t read_token_burst = 0;
  // With read replicas: how long a history page may still show an event that
  // was deleted, expired or replaced (docs/replicas.md); 0 = no replicas.
  int64_t replica_stale_removals_seconds = 0;
};

// The document as one JSON object (docs/protocol.md, "Limits").
std::string relay_info_json(const relay_info& info);

}  // namespace waggle::proto
