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

#include "actors/support/env.hpp"
#include "messages/interfaces.hpp"

namespace waggle {

struct group_state;
using group_ptr = group_actor::stateful_pointer<group_state>;

struct group_state {
  static inline const char* name = "group";

  // Not an aggregate: CAF would otherwise try to build it from the self pointer.
  group_state() = default;

  group_ptr self = nullptr;
  group_session_actor session;
  hub_actor hub;
  // Held, not just linked: with --ttl-reap-seconds 0 the reaper has no timer,
  // and an actor nobody references ends as unreachable, taking this one
  // (linked) down with it.
  ttl_reaper_actor reaper;
  node_env env;
  std::map<std::pair<int64_t, std::string>, roster_actor> rosters;

  void init(group_ptr self_ptr, group_session_actor group_session, hub_actor fanout, node_env e,
            std::string database_url, caf::timespan reap_interval, bool repair_on_start);
  caf::typed_response_promise<ingest_reply> on_command(const group_request& req);
  caf::typed_response_promise<roster_repair_reply> on_repair(const roster_repair_request& req);
  void on_archived(const channels_archived& msg);

 private:
  ingest_reply on_command_reply(int64_t community_id, const event_ptr& ev,
                                const group_command_reply& reply);
  void after_commit(int64_t community_id, const event_ptr& ev, const group_change& change);
  void after_uncertain(int64_t community_id, const event_ptr& ev);
  roster_actor& roster_for(int64_t community_id, const std::string& channel);
};

// Spawns the TTL reaper (linked) with `database_url` and `reap_interval`
// (zero: no timer). `repair_on_start` (a restart, not the node's first
// start, whose start-up checks repair) republishes stale rosters at once.
group_actor::behavior_type group_actor_impl(group_ptr self, group_session_actor session,
                                            hub_actor hub, node_env env, std::string database_url,
                                            caf::timespan reap_interval, bool repair_on_start);

}  // namespace waggle
