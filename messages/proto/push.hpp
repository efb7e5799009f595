#pragma once

// Push leases and push matching (docs/push.md), pure: no CAF, no database.
// A lease is a signed kind 30350 event (addressable, `d` = installation id)
// that says where one installation of an app wants wakes sent and for what;
// the matcher decides who is woken for which event with match_wakes below.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "messages/proto/event.hpp"
#include "messages/proto/status.hpp"

namespace waggle::proto::push {

inline constexpr int32_t kind_lease = 30350;

// The kinds that wake (the gate enqueues jobs for these only): chat and the
// thread/workflow kinds. Kept equal to waggle_is_push_kind (migrations/0009).
bool is_push_kind(int32_t kind);

struct lease_limits {
  int64_t max_lifetime_seconds = 30 * 24 * 3600;  // expiration at most this far ahead
  size_t max_channels = 64;                       // `channel` and `mute` tags, each
};

// A lease event's fields, validated.
struct lease {
  std::string installation_id;  // `d`: [A-Za-z0-9_-]{1,64}
  std::string endpoint_grant;   // `endpoint`: opaque to the relay, 1..512 bytes
  std::string endpoint_hash;    // sha256(endpoint_grant), 64 hex
  std::string app;              // `app`: 1..64 bytes
  int64_t expires_at = 0;       // `expiration`: unix seconds, in the future
  int64_t generation = 0;       // `generation`: >= 1, strictly rising per address
  std::vector<std::string> channels;  // `channel`: wake only for these (empty: all)
  std::vector<int32_t> kinds;         // `k`: push kinds that wake (empty: all)
  std::vector<std::string> mutes;     // `mute`: channels that never wake
};

// Parses and validates a kind 30350 event at `now` (unix seconds). The
// error's code is `invalid` with a reason a client can act on.
result<lease> parse_lease(const event& ev, int64_t now, const lease_limits& lim = {});

// -- matching --------------------------------------------------------------------

// What the matcher loaded for one batch (one community).
struct match_event {
  std::string id;      // 64 hex
  std::string author;  // 64 hex
  int32_t kind = 0;
  std::optional<std::string> channel;  // the `h` tag
};
struct match_lease {
  std::string author;  // 64 hex
  std::string installation_id;
  int64_t generation = 0;
  std::vector<std::string> channels;
  std::vector<int32_t> kinds;
  std::vector<std::string> mutes;
};
// (event index, lease author) pairs where the author may read the event now
// (community membership, a private channel's membership, no ban).
struct readable_pair {
  size_t event = 0;
  std::string author;
  bool operator<(const readable_pair& o) const {
    return event != o.event ? event < o.event : author < o.author;
  }
};

struct wake_request {
  size_t event = 0;  // index into the batch's events
  size_t lease = 0;  // index into the batch's leases
  bool operator==(const wake_request&) const = default;
};

// Who is woken for what: every (event, lease) where the event is a push kind
// the lease asks for (`kinds`), in a channel it asks for (`channels`, when
// set) and not muted, the lease's author is not the event's author (nobody
// wakes for their own message), and the author may read the event
// (`readable`, sorted). Ordered by event, then lease. With `readable` null,
// the candidates: every pair the other rules allow (the matcher asks the
// database about those pairs only).
std::vector<wake_request> match_wakes(const std::vector<match_event>& events,
                                      const std::vector<match_lease>& leases,
                                      const std::vector<readable_pair>* readable);

// The body POSTed to the push gateway (never the message content).
std::string gateway_body(std::string_view request_id, std::string_view endpoint_grant,
                         int64_t expires_at, std::string_view community,
                         std::string_view event_id);

}  // namespace waggle::proto::push
