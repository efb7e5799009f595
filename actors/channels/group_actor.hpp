#pragma once

// The group actor: NIP-29 channels of the node. It owns the group sessions
// (--group-sessions writer connections, linked) and one roster actor per
// channel that changed recently. Commands and roster publications wait in
// its queue (group_queue: by turns across communities, then senders; one
// item per channel at a time) and are dealt to idle sessions, so one
// community's backlog cannot hold another's command behind it. For a
// command a session applies it (one transaction, role checks under the
// membership lock), then, only after COMMIT: the command event goes to the
// hub, lost read access goes to the hub as channel_revoked (before the
// sender hears OK, so anything the sender does next reaches the hub after
// the revocation), the channel's roster actor is told to publish, and the
// sender gets its answer.

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "actors/channels/group_queue.hpp"
#include "actors/support/env.hpp"
#include "messages/interfaces.hpp"

namespace waggle {

struct group_settings {
  // The TTL reaper's connection (empty: no reaper) and sweep interval (zero:
  // no timer).
  std::string database_url;
  caf::timespan reap_interval{};
  // A restart, not the node's first start (whose start-up checks repair):
  // republish stale rosters at once.
  bool repair_on_start = false;
  // Commands waiting per community before `OK false "rate-limited: ..."`.
  size_t max_queue_per_community = 1000;
  // A roster actor idle this long is stopped (zero: never).
  caf::timespan roster_idle{std::chrono::seconds(60)};
  // Clustered: a roster publication goes to the channel's owner node
  // (roster_route through the hub), which coalesces every node's changes.
  bool route_rosters = false;
};

struct group_state;
using group_ptr = group_actor::stateful_pointer<group_state>;

struct group_state {
  static inline const char* name = "group";

  // Not an aggregate: CAF would otherwise try to build it from the self pointer.
  group_state() = default;

  struct roster_entry {
    roster_actor handle;
    uint64_t sent = 0;  // changes sent to it (an idle report must name all of them)
  };

  group_ptr self = nullptr;
  std::vector<group_session_actor> sessions;
  std::vector<bool> idle;  // per session: nothing of ours in its mailbox
  hub_actor hub;
  // Held, not just linked: with --ttl-reap-seconds 0 the reaper has no timer,
  // and an actor nobody references ends as unreachable, taking this one
  // (linked) down with it.
  ttl_reaper_actor reaper;
  node_env env;
  group_settings settings;
  group_queue queue;
  // What to run when the queue deals an item, by item id; called with the
  // index of the session it goes to.
  std::map<uint64_t, std::function<void(size_t)>> work;
  uint64_t next_id = 0;
  std::map<std::pair<int64_t, std::string>, roster_entry> rosters;

  void init(group_ptr self_ptr, std::vector<group_session_actor> group_sessions, hub_actor fanout,
            node_env e, group_settings s);
  caf::typed_response_promise<ingest_reply> on_command(const group_request& req);
  caf::typed_response_promise<roster_publish_reply> on_publish(const roster_publish_request& req);
  caf::typed_response_promise<roster_repair_reply> on_repair(const roster_repair_request& req);
  caf::typed_response_promise<fence_probe_reply> on_fence_probe();
  void on_archived(const channels_archived& msg);
  void on_roster_idle(const roster_idle& msg);
  // By this node's roster actor for the channel (another node's request
  // lands here: this node owns the channel).
  void mark_dirty_here(int64_t community_id, const std::string& channel);

 private:
  bool enqueue(group_queue::item it, std::function<void(size_t)> run);
  void dispatch();
  void finished(size_t session, int64_t community_id, const std::string& channel);
  ingest_reply on_command_reply(int64_t community_id, const event_ptr& ev,
                                const group_command_reply& reply);
  void after_commit(int64_t community_id, const event_ptr& ev, const group_change& change);
  void after_uncertain(int64_t community_id, const event_ptr& ev);
  static bool ends_access(const group_change& change);
  // Answers after the cluster barrier, then releases the channel's queue.
  void answer_after_barrier(caf::typed_response_promise<ingest_reply> promise,
                            ingest_reply answer, int64_t community_id, std::string channel);
  // The channel's roster needs publishing: by its owner node when routed.
  void mark_dirty(int64_t community_id, const std::string& channel);
};

// `sessions`: at least one. Spawns the TTL reaper (linked) when
// `settings.database_url` is set.
group_actor::behavior_type group_actor_impl(group_ptr self,
                                            std::vector<group_session_actor> sessions,
                                            hub_actor hub, node_env env, group_settings settings);

}  // namespace waggle
