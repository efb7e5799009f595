#pragma once

// The community watcher: after every change of who may use a community
// (membership, a ban, the policy; from this node, another node, the command
// line or psql), it publishes the NIP-43 state (8000 / 8001 per change, the
// 13534 list) under the lock-held capture of db::publish_access_changes,
// then hands the published events to the hub and ends the live
// subscriptions of whoever lost access (access_revoked through the hub).
// It learns of changes by LISTEN (the triggers of migrations/0004 NOTIFY on
// commit), by an access_poke from this node's membership and management
// actors, and by a slow poll that covers a notification lost with a
// connection. Detached, with its own connection; its timer is a typed input.

#include <memory>
#include <string>

#include "db/group_store.hpp"
#include "db/session.hpp"
#include "messages/interfaces.hpp"
#include "actors/support/env.hpp"

namespace waggle {

struct community_watcher_settings {
  caf::timespan tick = std::chrono::milliseconds(100);  // how often notifications are read
  int ticks_per_poll = 20;                               // a full look even without one
};

struct community_watcher_state;
using community_watcher_ptr = community_watcher_actor::stateful_pointer<community_watcher_state>;

struct community_watcher_state {
  static inline const char* name = "community_watcher";

  community_watcher_ptr self = nullptr;
  std::unique_ptr<db::session> session;
  db::relay_signer signer;
  hub_actor hub;
  community_directory_actor directory;
  node_env env;
  community_watcher_settings settings;
  int ticks_since_poll = 0;

  void init(community_watcher_ptr self_ptr, std::string database_url, db::relay_signer s,
            hub_actor h, community_directory_actor d, node_env e, community_watcher_settings cfg);
  void on_tick();
  // Publishes every community's pending changes; returns how many it published.
  size_t publish_pending();
};

community_watcher_actor::behavior_type community_watcher_actor_impl(
  community_watcher_ptr self, std::string database_url, db::relay_signer signer, hub_actor hub,
  community_directory_actor directory, node_env env, community_watcher_settings settings);

}  // namespace waggle
