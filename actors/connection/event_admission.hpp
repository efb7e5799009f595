#pragma once

// Pure admission decisions shared by the WebSocket and HTTP paths: which
// events are refused before the database, and where an admitted one goes.
// They run on scheduler threads (never on the socket threads) because they
// verify signatures.

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <string_view>

#include "messages/proto/event.hpp"
#include "messages/proto/status.hpp"

namespace waggle {

struct admission_policy {
  int64_t created_at_window = 900;  // seconds either side of now
  int64_t auth_window = 60;         // NIP-42 and NIP-98 created_at tolerance
};

constexpr int32_t auth_kind = 22242;

// Checks an EVENT for storage: not an AUTH event, created_at within the
// window, no NIP-40 expiration at or before `now` (nor a malformed one),
// signature valid. `authed` holds the pubkeys this client proved. `vouched`
// (admission_request::vouched) waives the created_at window and the
// authenticated-pubkey check, and nothing else.
status admit_event(const proto::event& ev, const std::set<std::string>& authed, int64_t now,
                   const admission_policy& policy, bool vouched = false);

// NIP-42: kind 22242, `challenge` tag equal to ours, a `relay` tag that parses
// as a URL naming this relay (proto::nip42::check_relay_tag: the request's
// Host, and its port when both name one), created_at within auth_window,
// valid signature.
status check_auth_event(const proto::event& ev, std::string_view challenge,
                        std::string_view host, std::optional<uint16_t> host_port, int64_t now,
                        const admission_policy& policy);

// Where an incoming EVENT goes, decided once for both transports.
enum class route : uint8_t {
  reject,         // answered `refusal` at once; nothing is stored or sent on
  ephemeral,      // 20000-29999: fanned out, never stored (members only in a channel)
  group_command,  // NIP-29 9000-9022: the group actor authorises and stores it
  membership,     // NIP-43 join (28934) / leave (28936): the membership actor answers it
  store,          // ingest stores it
};

struct admission {
  waggle::route route = route::reject;
  status refusal;                      // why, when route is reject
  std::optional<std::string> channel;  // the event's `h` tag, if any
};

struct admission_request {
  const std::set<std::string>& authed;  // pubkeys proven on this connection / by NIP-98
  int64_t now = 0;
  const admission_policy& policy;
  std::string_view relay_pubkey;  // only it signs group state (39000-39003)
  bool ephemeral_in_channels = true;  // false over HTTP: channel presence is WebSocket-only
  // Someone the relay trusts vouches for the event's origin: `waggle import`
  // (the operator) and configured sync peers. Waives exactly two checks of
  // live ingest, the created_at window (history is old) and "the event's
  // pubkey is authenticated on this connection" (the author is not here);
  // every other rule stands. docs/portability.md, "What is vouched".
  bool vouched = false;
};

// admit_event, the `h` tag's shape, who may sign group state, then the route.
admission classify_event(const proto::event& ev, const admission_request& req);

}  // namespace waggle
