#pragma once

// NIP-98 HTTP auth for POST /events, plus the small encoders it needs. Pure
// functions (no sockets, no CAF) so they are testable on their own.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "messages/proto/status.hpp"

namespace waggle::proto {

// Standard base64 (RFC 4648 §4). Decoding is strict about the alphabet but
// accepts missing '=' padding; whitespace or any other byte fails.
std::string base64_encode(std::string_view data);
std::optional<std::string> base64_decode(std::string_view text);

// SHA-256 of `data`, lowercase hex.
std::string sha256_hex(std::string_view data);

struct nip98_result {
  bool ok = false;
  std::string pubkey;   // the authenticated key when ok
  status err;           // ec::auth_required and why, when not ok
  bool missing_payload = false;  // refused for want of a `payload` tag (counted apart)
  // When ok: what tells this token from any other, and its created_at, so
  // that the caller can refuse a token used before
  // (actors/support/seen_tokens.hpp). The signature, not the event id: a
  // client that signs the same request twice within a second signs the same
  // id, but BIP-340's random nonce gives it another signature, which no one
  // else can make (signatures are not malleable); a replay is the same bytes.
  std::string token_key;
  int64_t created_at = 0;
};

// Checks an `Authorization: Nostr <base64 event>` header value against the
// request: kind 27235, valid id and signature, created_at within
// `window_seconds` of `now`, a `u` tag equal to <scheme>://<host><target>
// (scheme http or https, compared case-insensitively, as is the host; the
// path and query are compared exactly), a `method` tag equal to `method`, and
// a `payload` tag equal to the SHA-256 hex of `body`, required whenever the
// body is not empty (the token must bind what it authorizes) and, with
// `require_payload` (NIP-86), even for an empty one.
nip98_result verify_nip98(std::string_view authorization, std::string_view method,
                          std::string_view host, std::string_view target, std::string_view body,
                          int64_t now, int64_t window_seconds = 60, bool require_payload = false);

// The other side, for the relay's own requests (delivery slots): an
// `Authorization` header value ("Nostr <base64 event>") for `method` on
// `url`, signed with `secret_hex`, with a `payload` tag binding `body`
// (always present, even for an empty body).
std::string make_nip98(std::string_view secret_hex, std::string_view url, std::string_view method,
                       std::string_view body, int64_t now);

}  // namespace waggle::proto
