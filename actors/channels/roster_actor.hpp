#pragma once

// The roster actor of one channel: it publishes the channel's relay-signed
// state (39000, 39001, 39002) after every change. Publications of one
// channel never overlap: a change that arrives while one is in flight marks
// the roster dirty and is published right after, so the last publication
// always follows the last change. The capture itself happens inside the
// publication's transaction, under the membership lock (db::publish_roster).
// A failed publication is retried with backoff; start-up repair catches
// anything a crash left behind. Publications go through the group actor,
// which queues them with the community's commands.
//
// Idle (nothing in flight, nothing dirty, no retry pending) for
// `idle_timeout`, it reports roster_idle to the group actor, which stops it
// with roster_stop unless it sent a change since; it holds nothing the
// database does not (every publication captures the roster afresh), so the
// next change's new roster actor loses nothing.

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
  group_actor group;
  hub_actor hub;
  node_env env;
  caf::timespan idle_timeout{};  // zero: never stops
  bool in_flight = false;
  bool dirty = false;
  int failures = 0;
  uint64_t generation = 0;  // changes taken from the group actor

  void init(roster_ptr self_ptr, int64_t community, std::string channel_name, group_actor parent,
            hub_actor fanout, node_env e, caf::timespan idle);
  // A change (or a retry's timer): publish now, or after the one in flight.
  void on_dirty(bool retry);
  // The idle timer armed at `gen` changes fired.
  void on_idle_tick(uint64_t gen);

 private:
  void publish();
  void on_published(roster_publish_reply& reply);
  void on_publish_failed(const caf::error& err);
  void on_publication_done(bool ok);
  void arm_idle_timer();
};

roster_actor::behavior_type roster_actor_impl(roster_ptr self, int64_t community_id,
                                              std::string channel, group_actor group,
                                              hub_actor hub, node_env env,
                                              caf::timespan idle_timeout);

}  // namespace waggle
