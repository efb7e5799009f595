#pragma once

// Pure admission decisions shared by the WebSocket and HTTP paths. They run
// on scheduler threads (never on the socket threads) because they verify
// signatures.

#include <cstdint>
#include <set>
#include <string>
#include <string_view>

#include "db/event_store.hpp"
#include "messages/proto/event.hpp"
#include "messages/proto/status.hpp"

namespace waggle {

struct admission_policy {
  int64_t created_at_window = 900;  // seconds either side of now
  int64_t auth_window = 60;         // NIP-42 and NIP-98 created_at tolerance
};

constexpr int32_t auth_kind = 22242;
constexpr int32_t http_auth_kind = 27235;

// Checks an EVENT for storage: not an AUTH event, created_at within the
// window, signature valid. `authed` holds the pubkeys this client proved.
status admit_event(const proto::event& ev, const std::set<std::string>& authed, int64_t now,
                   const admission_policy& policy);

// NIP-42: kind 22242, `challenge` tag equal to ours, `relay` tag whose host
// equals the request's Host, created_at within auth_window, valid signature.
status check_auth_event(const proto::event& ev, std::string_view challenge,
                        std::string_view host, int64_t now, const admission_policy& policy);

// How a storage outcome is answered (OK's accepted flag and message), the
// same over WebSocket and HTTP.
struct ok_answer {
  bool accepted = false;
  std::string message;
};
ok_answer answer_for(db::write_outcome outcome, const std::string& reason);

// "wss://Relay.Example:443/path" -> "relay.example" (lowercase, no port).
std::string host_of_url(std::string_view url);

}  // namespace waggle
