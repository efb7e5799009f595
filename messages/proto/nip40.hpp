#pragma once

// NIP-40 expiration: an event's `expiration` tag, read once here for the
// admission check, the write path (events.expires_at) and the fanout hub.
// Pure: no CAF, no database.

#include <cstdint>
#include <optional>

#include "messages/proto/event.hpp"
#include "messages/proto/status.hpp"

namespace waggle::proto {

// The value of the FIRST `expiration` tag, in unix seconds; nullopt when the
// event has none. `invalid` when that value is not a non-negative decimal
// integer that fits in 64 bits (an empty value, a sign, a space, a fraction,
// or no value at all): a malformed expiration is refused, never guessed.
result<std::optional<int64_t>> expiration_of(const event& ev);

// Whether an event that expires at `expires_at` (nullopt: never) has expired
// at `now`: NIP-40 treats the expiration second itself as expired.
constexpr bool has_expired(std::optional<int64_t> expires_at, int64_t now) {
  return expires_at && *expires_at <= now;
}

// Cheap pre-check for hot paths (the hub): true if any tag is named
// `expiration`, without parsing its value.
bool has_expiration_tag(const event& ev);

}  // namespace waggle::proto
