#pragma once

// NIP-29 (relay-based groups) as waggle uses it for channels: the command
// kinds, roles, the parse of a command event, the pure permission rules and
// the tags of the relay-signed state events. Pure: no CAF, no database. The
// group store (db/group_store.cpp) loads the facts under the channel's
// membership lock and asks these functions what may happen.
//
// Roles and what they may do are documented in docs/channels.md; this file
// is the single place those rules are written as code.

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "messages/proto/event.hpp"
#include "messages/proto/status.hpp"

namespace waggle::proto::nip29 {

enum class role : uint8_t { owner, admin, member, guest, bot };

std::optional<role> parse_role(std::string_view name);  // exact, lowercase

// Text a client gives that the relay copies into the events it signs (a
// channel's name, about, picture): no control characters, U+0000-U+001F and
// U+007F. A NUL used to be cut where the text met the database, so the relay
// signed something other than what was asked; the rest can break the
// rendering of clients that trust relay-signed state. `invalid` names `field`.
status check_relay_text(std::string_view field, std::string_view value);
std::string_view name_of(role r);
// owner and admin moderate (put/remove users, edit metadata, delete events).
constexpr bool moderates(role r) { return r == role::owner || r == role::admin; }

// Commands (client -> relay).
constexpr int32_t kind_put_user = 9000;
constexpr int32_t kind_remove_user = 9001;
constexpr int32_t kind_edit_metadata = 9002;
constexpr int32_t kind_delete_event = 9005;
constexpr int32_t kind_create_group = 9007;
constexpr int32_t kind_delete_group = 9008;
constexpr int32_t kind_join_request = 9021;
constexpr int32_t kind_leave_request = 9022;
// Relay-signed state (addressable, d = group id).
constexpr int32_t kind_group_metadata = 39000;
constexpr int32_t kind_group_admins = 39001;
constexpr int32_t kind_group_members = 39002;
constexpr int32_t kind_group_roles = 39003;

constexpr bool is_group_command(int32_t k) {
  return k == kind_put_user || k == kind_remove_user || k == kind_edit_metadata ||
         k == kind_delete_event || k == kind_create_group || k == kind_delete_group ||
         k == kind_join_request || k == kind_leave_request;
}

// Where an event goes among the events of one second when history is loaded
// again in order (import, sync; export writes this order): what opens a
// channel or lets someone in first, what shuts it or takes something away
// last, the rest between. Loaded by (created_at, id) alone, a post could
// come before the creation of its channel and be refused.
constexpr int replay_rank(int32_t k) {
  switch (k) {
    case kind_create_group: return 0;
    case kind_put_user: case kind_edit_metadata: case kind_join_request: return 1;
    case kind_remove_user: case kind_delete_event: case kind_leave_request: return 3;
    case kind_delete_group: return 4;
    default: return 2;
  }
}
constexpr bool is_group_state(int32_t k) { return k >= 39000 && k <= 39003; }

// Group ids: 1..64 characters of [a-z0-9_-] (the channels_id_shape CHECK).
bool valid_group_id(std::string_view id);

// The channel an event belongs to: the value of its `h` tag; nullopt when it
// has none. Errors (ec::invalid): more than one `h` tag, an `h` tag without a
// value, or a value that is not a valid group id. Relay-signed state kinds
// (39000-39003) belong to no channel (they are addressed by `d`).
result<std::optional<std::string>> channel_of(const event& ev);

struct user_role {
  std::string pubkey;  // 64 lowercase hex
  role r = role::member;
};

// What a command event asks for. Fields a command does not use stay empty.
struct group_command {
  int32_t kind = 0;
  std::string group;                // the `h` tag
  std::vector<user_role> users;     // 9000: ["p", pk, role?] (default member); 9001: ["p", pk]
  std::vector<std::string> event_ids;  // 9005: ["e", id]
  // 9002 and 9007; absent = unchanged (9002) or default (9007).
  std::optional<std::string> name, about, picture;
  std::optional<bool> is_private;   // ["private"] -> true, ["public"] -> false
  // ["ttl", "<seconds>"]: positive = ephemeral with that TTL; "0" = permanent.
  std::optional<std::optional<int32_t>> ttl_seconds;
};

// Parses and validates the shape of a command (kind must satisfy
// is_group_command). ec::invalid with a reason on bad input: missing or bad
// `h`, 9000/9001 without a valid ["p", hex] tag, unknown role name, 9005
// without an `e` tag of 64 hex, a non-numeric or negative ttl, a ttl over
// 366 days, name over 128 bytes, about over 2048, picture over 1024.
result<group_command> parse_group_command(const event& ev);

// The facts about a channel the rules need, read under its membership lock.
struct channel_view {
  bool exists = false;
  bool deleted = false;
  bool archived = false;
  bool open = true;  // visibility 'open' (else 'private')
};

// Active members and their roles.
using roster = std::map<std::string, role>;  // pubkey hex -> role

// Whether `author` may post a regular (non-command) event in the channel:
// ec::restricted with a reason when the channel does not exist, was deleted
// or archived, or the author is not an active member (the reason tells them
// to join with kind 9021 if the channel is open).
status may_post(const channel_view& ch, std::optional<role> author_role);

// Whether a connection whose authenticated pubkeys include `member_count`
// active members of the channel may read it: open channels -> yes for any
// authenticated user; private -> only members. Deleted or missing channels
// are refused (ec::restricted).
status may_read(const channel_view& ch, size_t member_count);

// One membership change a command makes. new_role nullopt = removed.
struct roster_change {
  std::string pubkey;
  std::optional<role> new_role;
};

// The membership changes of 9000 / 9001 / 9021 / 9022 by `actor`, or a
// refusal (ec::restricted / ec::invalid):
//   9000 put user: actor must moderate; granting or changing an owner or
//        admin role needs an owner; an admin may put member/guest/bot only
//        and may not change an owner's or admin's role.
//   9001 remove: actor must moderate; removing an owner or admin needs an
//        owner; removing someone who is not a member is a no-op (no change).
//   9021 join: open channel -> actor becomes member (no-op if already one);
//        private channel -> refused ("restricted: private channel ...").
//   9022 leave: actor must be a member.
//   Always: the channel must exist and not be deleted (archived channels
//   accept leave only); the result must leave at least one owner ("the last
//   owner cannot be removed" / "cannot leave" / "cannot be demoted").
result<std::vector<roster_change>> plan_membership(const group_command& cmd,
                                                   const std::string& actor,
                                                   const channel_view& ch, const roster& members);

// Whether `actor` may run 9002 (edit metadata; changing visibility or TTL
// included), 9005 (delete events) or 9008 (delete group): 9002/9005 need a
// moderating role, 9008 needs owner. The channel must exist and not be deleted.
status authorize(const group_command& cmd, const std::string& actor, const channel_view& ch,
                 const roster& members);

// 9007: the group must not exist yet (ec::invalid "group already exists",
// also when it was deleted: ids are never reused).
status may_create(const channel_view& ch);

// The metadata of a channel as published in 39000.
struct group_metadata {
  std::string id, name, about, picture;
  bool open = true;
  std::optional<int32_t> ttl_seconds;
  bool archived = false;
};

// Tags of the relay-signed state events, in a deterministic order:
// 39000: ["d",id], ["name",..], ["about",..] (if set), ["picture",..] (if set),
//        ["public"] or ["private"], ["open"] or ["closed"] (open channels are
//        public+open, private ones private+closed), ["ttl","<s>"] if ephemeral,
//        ["archived"] if archived.
// 39001: ["d",id], then ["p", pk, role] for each owner and admin, by pubkey.
// 39002: ["d",id], then ["p", pk, "", role] for EVERY member, by pubkey (no cap).
std::vector<tag> metadata_tags(const group_metadata& md);
std::vector<tag> admins_tags(const std::string& group, const roster& members);
std::vector<tag> members_tags(const std::string& group, const roster& members);

}  // namespace waggle::proto::nip29
