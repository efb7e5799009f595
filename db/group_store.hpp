#pragma once

// The SQL of NIP-29 channels: commands (create, edit, put/remove user, join,
// leave, delete event, delete group), the relay-signed roster publication,
// read-access facts and the TTL reaper. Each function is one transaction on
// the caller's connection (the group session or a reader session owns it).
//
// Lock protocol (docs/lock-protocol.md): replacement -> membership ->
// channel_ttl, keys from db/event_store.hpp. Membership changes take the
// channel's membership key EXCLUSIVE; role checks of edits and deletions and
// roster captures take it SHARED (never two domains exclusively on one path).

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <pqxx/connection>

#include "db/event_store.hpp"
#include "messages/proto/nip29.hpp"

namespace waggle::db {

class read_budget;  // db/read_budget.hpp: the time a read may spend, all statements together

// The relay's own key. The secret never leaves the group session and is
// never logged or traced.
struct relay_signer {
  std::string secret;  // 64 hex
  std::string pubkey;  // 64 hex
};

struct command_outcome {
  write_result result;  // stored / duplicate / rejected (invalid) / refused (restricted)
  group_change change;  // empty unless stored
};

// Runs one NIP-29 command event in ONE transaction: the channel's membership
// lock (EXCLUSIVE for membership changes, creation and deletion; SHARED for
// 9002 and 9005, plus channel_ttl EXCLUSIVE when 9002 sets a TTL), the role
// checks of proto::nip29 on facts read under that lock, the change, and the
// command event itself (a duplicate id changes nothing), then COMMIT.
// Throws pqxx exceptions (the caller's failure policy decides).
command_outcome apply_group_command(pqxx::connection& conn, int64_t community_id,
                                    const event_ptr& ev);

// One publication of the channel's relay-signed state, 39000, 39001 and 39002,
// in ONE transaction: the three coordinates' replacement locks (sorted), then
// the membership lock SHARED, held until COMMIT; the roster is captured under
// it, so no membership change can commit between the capture and the
// publication (the kind-39002 fence trigger checks the same thing in the
// database). created_at = max(now, newest stored version + 1) per kind, so a
// republish never reproduces an id. `after_capture` (tests) runs with the
// lock held, right after the capture. Returns the stored events (none when
// the channel does not exist or was deleted) and the captured roster.
struct roster_publication {
  std::vector<event_ptr> events;
  proto::nip29::roster members;
};
roster_publication publish_roster(
  pqxx::connection& conn, int64_t community_id, const std::string& channel,
  const relay_signer& signer, int64_t now,
  const std::function<void(const proto::nip29::roster&)>& after_capture = {});

// Read access facts of `channels` for a connection authenticated as `pubkeys`:
// the channel's state and which of the pubkeys are active members.
struct channel_access {
  std::string channel;
  proto::nip29::channel_view view;
  std::vector<std::string> members;  // subset of `pubkeys`
};
std::vector<channel_access> read_channel_access(pqxx::connection& conn, int64_t community_id,
                                                const std::vector<std::string>& channels,
                                                const std::vector<std::string>& pubkeys,
                                                read_budget* budget = nullptr);

// The reaper: archives live ephemeral channels past their deadline, each in
// its own short transaction that takes the channel_ttl key EXCLUSIVE with a
// try-lock (a channel whose commit is refreshing it right now is skipped
// this round; the refresh moves its deadline anyway). At most `limit`.
std::vector<channel_ref> archive_expired_channels(pqxx::connection& conn, int limit);

}  // namespace waggle::db
