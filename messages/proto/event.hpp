#pragma once

// A Nostr event (NIP-01) as the relay holds it after parsing and validation.
// Pure data and pure functions: no CAF, no database.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "messages/proto/status.hpp"

namespace waggle::proto {

using tag = std::vector<std::string>;

struct event {
  std::string id;      // 64 lowercase hex chars
  std::string pubkey;  // 64 lowercase hex chars (x-only key)
  int64_t created_at = 0;
  int32_t kind = 0;
  std::vector<tag> tags;
  std::string content;
  std::string sig;     // 128 lowercase hex chars
  // The event as a compact JSON object in NIP-01 field order, re-serialised by
  // us (never the client's bytes), so it can be stored and sent verbatim.
  std::string raw;

  bool operator==(const event&) const = default;
};

// Kind classes of NIP-01.
constexpr bool is_ephemeral(int32_t kind) { return kind >= 20000 && kind < 30000; }
constexpr bool is_replaceable(int32_t kind) {
  return kind == 0 || kind == 3 || (kind >= 10000 && kind < 20000);
}
constexpr bool is_addressable(int32_t kind) { return kind >= 30000 && kind < 40000; }

// First value of the first tag named `name`, if any.
std::optional<std::string_view> first_tag_value(const event& ev, std::string_view name);

// The `d` tag value of an addressable event ("" when absent).
std::string d_tag(const event& ev);

// NIP-01 canonical serialisation: [0,<pubkey>,<created_at>,<kind>,<tags>,<content>]
// with NIP-01's escaping rules (only \" \\ \n \r \t \b \f are escaped; other
// control characters as \u00XX; everything else, including non-ASCII, verbatim).
std::string canonical_serialization(const event& ev);

// SHA-256 of the canonical serialisation, lowercase hex.
std::string compute_id(const event& ev);

// Compact JSON of the whole event (what `raw` holds).
std::string to_json(const event& ev);

// Parses a JSON object into an event and checks shape, hex fields, lengths and
// that the id matches the content. Does NOT verify the signature (that is
// verify_signature, run off the socket threads) nor the created_at window.
// Errors carry a human-readable reason for the `invalid:` message.
result<event> parse_event(std::string_view json);

// BIP-340 Schnorr verification of sig over id with pubkey.
bool verify_signature(const event& ev);

// Low-level BIP-340 check over a 32-byte message (for the test vectors).
bool verify_schnorr(std::string_view pubkey_hex, std::string_view msg_hex, std::string_view sig_hex);

// Signing, for tests, tools and the relay's own key. `secret_hex` is 32 bytes hex.
std::string pubkey_of(std::string_view secret_hex);
// Fills pubkey, id, sig and raw of `ev` from its other fields.
void sign(event& ev, std::string_view secret_hex);

// Hex helpers.
bool is_lower_hex(std::string_view s, size_t len);
std::string to_hex(const unsigned char* data, size_t len);
bool from_hex(std::string_view hex, unsigned char* out, size_t out_len);

}  // namespace waggle::proto
