#pragma once

// The group actor: NIP-29 channels of the node. It owns the group session
// (one writer connection, linked) and one roster actor per channel that has
// changed. For a command it asks the session to apply it (one transaction,
// role checks under the membership lock), then, only after COMMIT: the
// command event goes to the hub, lost read access goes to the hub as
// channel_revoked (before the sender hears OK, so anything the sender does
// next reaches the hub after the revocation), the channel's roster actor is
// told to publish, and the sender gets its answer.

#include <cstdint>
#include <map>
#include <string>
#include <utility>

#include "actors/env.hpp"
#include "messages/interfaces.hpp"

namespace waggle {

struct group_state {
  // Not an aggregate: CAF would otherwise try to build it from the self pointer.
  group_state() = default;

  group_session_actor session;
  hub_actor hub;
  // Held, not just linked: with --ttl-reap-seconds 0 the reaper has no timer,
  // and an actor nobody references ends as unreachable, taking this one
  // (linked) down with it.
  reaper_actor reaper;
  node_env env;
  std::map<std::pair<int64_t, std::string>, roster_actor> rosters;

  static inline const char* name = "group";
};

// Spawns the TTL reaper (linked) with `database_url` and `reap_interval`
// (zero: no timer). `repair_on_start` (a restart, not the node's first
// start, whose start-up checks repair) republishes stale rosters at once.
group_actor::behavior_type group_actor_impl(group_actor::stateful_pointer<group_state> self,
                                            group_session_actor session, hub_actor hub,
                                            node_env env, std::string database_url,
                                            caf::timespan reap_interval, bool repair_on_start);

}  // namespace waggle
