#pragma once

// What the group actor, its sessions, its roster actors and the TTL reaper
// take (NIP-29 channels, docs/channels.md). The revocations the group actor
// sends through the hub are in messages/fanout.hpp. Each struct's `inspect`
// is beside it; the type IDs are in messages/type_ids.hpp.

#include <cstdint>
#include <string>
#include <vector>

#include <caf/meta/type_name.hpp>

#include "messages/proto/status.hpp"
#include "messages/value_inspect.hpp"
#include "messages/values.hpp"

namespace waggle {

// -- commands ---------------------------------------------------------------------

// Connection actor / HTTP submit -> group actor: a NIP-29 command event.
// Answered like ingest, after COMMIT.
struct group_request {
  int64_t community_id = 0;
  event_ptr ev;
};
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, group_request& x) {
  return f(caf::meta::type_name("group_request"), x.community_id, x.ev);
}

// Group actor -> group session.
struct group_command_request {
  int64_t community_id = 0;
  event_ptr ev;
};
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, group_command_request& x) {
  return f(caf::meta::type_name("group_command_request"), x.community_id, x.ev);
}

struct group_command_reply {
  write_result result;
  group_change change;
};
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, group_command_reply& x) {
  return f(caf::meta::type_name("group_command_reply"), x.result, x.change);
}

// -- rosters ----------------------------------------------------------------------

// Roster actor -> group session: publish 39000/39001/39002 now. `now` comes
// from the roster actor's node_env (so a replay signs the same created_at).
struct roster_publish_request {
  int64_t community_id = 0;
  std::string channel;
  int64_t now = 0;
};
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, roster_publish_request& x) {
  return f(caf::meta::type_name("roster_publish_request"), x.community_id, x.channel, x.now);
}

struct roster_publish_reply {
  std::vector<event_ptr> events;  // stored by this publication
  status err;
};
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, roster_publish_reply& x) {
  return f(caf::meta::type_name("roster_publish_reply"), x.events, x.err);
}

// Group actor -> roster actor: the channel changed; publish (again).
// `retry` marks the roster actor's own retry after a failed publication (a
// timer, recorded as such in traces).
struct roster_dirty {
  bool retry = false;
};
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, roster_dirty& x) {
  return f(caf::meta::type_name("roster_dirty"), x.retry);
}

// A roster actor's idle timer (roster actor -> itself): `generation` is the
// number of changes it had taken when it armed it, so a change since makes
// the tick stale.
struct roster_idle_tick {
  uint64_t generation = 0;
};
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, roster_idle_tick& x) {
  return f(caf::meta::type_name("roster_idle_tick"), x.generation);
}

// Roster actor -> group actor: idle since it took `generation` changes; the
// group actor stops it (roster_stop) if it has sent no change since.
struct roster_idle {
  int64_t community_id = 0;
  std::string channel;
  uint64_t generation = 0;
};
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, roster_idle& x) {
  return f(caf::meta::type_name("roster_idle"), x.community_id, x.channel, x.generation);
}

// Group actor -> an idle roster actor: quit. The next change spawns a new
// one, which captures the roster from the database like any publication.
struct roster_stop {};
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, roster_stop&) {
  return f(caf::meta::type_name("roster_stop"));
}

// Start-up (node) -> group actor -> group session: republish every stored
// 39002 that differs from channel_members (db::stale_rosters).
struct roster_repair_request {
  int64_t now = 0;
};
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, roster_repair_request& x) {
  return f(caf::meta::type_name("roster_repair_request"), x.now);
}

struct roster_repair_reply {
  uint64_t repaired = 0;
  std::vector<ingest_item> events;
  status err;
};
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, roster_repair_reply& x) {
  return f(caf::meta::type_name("roster_repair_reply"), x.repaired, x.events, x.err);
}

// -- TTL reaper -------------------------------------------------------------------

// TTL reaper timer, and what it archived (-> group actor, to republish 39000).
struct reap_tick {};
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, reap_tick&) {
  return f(caf::meta::type_name("reap_tick"));
}

struct channels_archived {
  std::vector<channel_ref> channels;
};
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, channels_archived& x) {
  return f(caf::meta::type_name("channels_archived"), x.channels);
}

}  // namespace waggle
