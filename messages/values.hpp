#pragma once

// The values that cross actor mailboxes and layer boundaries: events on their
// way to and from the database, what a write did, what a channel command
// changed, and the communities Host names. They are plain data with no
// dependency beyond the protocol types, so every layer (db, gateway, actors)
// can speak them; the SQL that produces them lives in db/.

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "messages/proto/event.hpp"

namespace waggle {

// -- events -------------------------------------------------------------------

// Events are shared, immutable and never copied on the way to the database.
using event_ptr = std::shared_ptr<const proto::event>;

// One event of one community, as ingest batches it and the hub fans it out.
struct ingest_item {
  int64_t community_id = 0;
  event_ptr ev;
};

// -- reads --------------------------------------------------------------------

// Where a history read in pages stands (docs/protocol.md, "History in
// pages"). Every event at or before the horizon (newest first, ties by id
// ascending) that any filter owes has been sent; the next page reads only
// past it, so a page is a plain keyset continuation and the reader keeps no
// state between pages.
struct history_page {
  // Rows each filter may return in this page; 0: the whole history at once.
  uint32_t rows = 0;
  bool started = false;  // false: the first page (no horizon yet)
  int64_t horizon_created_at = 0;
  std::string horizon_id;  // hex
  // Per filter, rows it may still return (its limit less those sent); 0
  // once it has nothing more. Empty on the first page: each filter's limit.
  std::vector<uint32_t> remaining;
};

// -- writes -------------------------------------------------------------------

// What storing one event did. messages/outcome.hpp says how each is answered.
enum class write_outcome : uint8_t {
  stored,      // inserted by this batch
  duplicate,   // (community_id, id) already stored: no side effect ran again
  superseded,  // replaceable/addressable with a newer (or tie-winning) version stored
  rejected,    // deterministic failure of this event alone (after bisection)
  refused,     // not allowed: channel access (NIP-29), rendered "restricted:"
  failed,      // transient/unavailable: nothing is known to be stored
  blocked,     // the community's policy refuses it (a ban, a kind rule): "blocked:"
  rate_limited,  // not tried: a queue bound of the node (the group queue): "rate-limited:"
};

struct write_result {
  write_outcome outcome = write_outcome::failed;
  std::string reason;  // human-readable, for rejected/failed
};

// -- channels (NIP-29) --------------------------------------------------------

// What a committed command changed, for the roster actor and the hub.
struct group_change {
  std::string channel;
  bool roster_changed = false;    // membership or roles (republish 39001/39002)
  bool metadata_changed = false;  // 39000
  bool deleted = false;           // 9008: every reader loses access
  bool became_private = false;    // readers that were not members lose access
  std::vector<std::string> removed;  // pubkeys whose membership ended
  bool any() const { return roster_changed || metadata_changed || deleted; }
};

// One channel of one community (the TTL reaper's archive list).
struct channel_ref {
  int64_t community_id = 0;
  std::string channel;
};

// -- communities --------------------------------------------------------------

// Who may use a community beyond AUTH (docs/communities.md): `open`, any
// authenticated key; `closed`, members only; `invite`, members only, and
// NIP-43 invite codes let new keys in.
enum class community_policy : uint8_t { open, closed, invite };
std::string_view name_of(community_policy p);
std::optional<community_policy> parse_community_policy(std::string_view text);

// A member's standing in its community.
enum class member_role : uint8_t { owner, admin, member };
std::string_view name_of(member_role r);
std::optional<member_role> parse_member_role(std::string_view text);

// A tenant, chosen by the request's Host.
struct community {
  int64_t id = 0;
  std::string host;  // lowercase, no port
  std::string name;
  bool archived = false;
  community_policy policy = community_policy::closed;
  std::string description;  // this community's NIP-11 text and icon (NIP-86)
  std::string icon;
  // Addresses refused by the gateway (NIP-86 blockip), as the gateway spells
  // peers: exact addresses, IPv4-mapped IPv6 as IPv4.
  std::vector<std::string> blocked_ips;
  bool blocks(std::string_view ip) const;
  bool operator==(const community&) const = default;
};

// An IPv4-mapped IPv6 address as IPv4 ("::ffff:10.0.0.1" -> "10.0.0.1"),
// anything else as it is: how blocked addresses compare.
std::string_view unmapped_ip(std::string_view ip);

// Lowercases and strips a port (and IPv6 brackets are kept: "[::1]:7777" -> "[::1]").
std::string normalize_host(std::string_view host);

}  // namespace waggle
