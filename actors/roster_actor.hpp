#pragma once

// The roster actor of one channel: it publishes the channel's relay-signed
// state (39000, 39001, 39002) after every change. Publications of one
// channel never overlap: a change that arrives while one is in flight marks
// the roster dirty and is published right after, so the last publication
// always follows the last change. The capture itself happens inside the
// publication's transaction, under the membership lock (db::publish_roster).
// A failed publication is retried with backoff; start-up repair catches
// anything a crash left behind.

#include <chrono>
#include <cstdint>
#include <string>

#include "actors/env.hpp"
#include "messages/interfaces.hpp"

namespace waggle {

struct roster_state {
  int64_t community_id = 0;
  std::string channel;
  group_session_actor session;
  hub_actor hub;
  node_env env;
  bool in_flight = false;
  bool dirty = false;
  int failures = 0;

  static inline const char* name = "roster";
};

roster_actor::behavior_type roster_actor_impl(roster_actor::stateful_pointer<roster_state> self,
                                              int64_t community_id, std::string channel,
                                              group_session_actor session, hub_actor hub,
                                              node_env env);

}  // namespace waggle
