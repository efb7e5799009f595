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

#include "actors/support/env.hpp"
#include "messages/interfaces.hpp"

namespace waggle {

struct roster_state;
using roster_ptr = roster_actor::stateful_pointer<roster_state>;

struct roster_state {
  static inline const char* name = "roster";

  roster_ptr self = nullptr;
  int64_t community_id = 0;
  std::string channel;
  group_session_actor session;
  hub_actor hub;
  node_env env;
  bool in_flight = false;
  bool dirty = false;
  int failures = 0;

  void init(roster_ptr self_ptr, int64_t community, std::string channel_name,
            group_session_actor group_session, hub_actor fanout, node_env e);
  // A change (or a retry's timer): publish now, or after the one in flight.
  void on_dirty();

 private:
  void publish();
  void on_published(roster_publish_reply& reply);
  void on_publish_failed(const caf::error& err);
  void on_publication_done(bool ok);
};

roster_actor::behavior_type roster_actor_impl(roster_ptr self, int64_t community_id,
                                              std::string channel, group_session_actor session,
                                              hub_actor hub, node_env env);

}  // namespace waggle
