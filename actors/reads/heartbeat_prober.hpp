#pragma once

// The heartbeat prober (docs/replicas.md): every interval, on its own pinned
// writer connection, it commits a probe (the fence sampled first, the token
// last) and pushes the proof into the ring the reader sessions route by. A
// token that goes backwards in the same epoch (a restored or failed-over
// primary) clears the ring and rotates the epoch on the writer, so no replica
// of the old history validates again; until the rotation commits, nothing is
// pushed. Detached: libpqxx blocks. The tick is a typed input, so tests can
// send it by hand.

#include <chrono>
#include <memory>
#include <string>

#include "actors/reads/heartbeat_ring.hpp"
#include "actors/support/env.hpp"
#include "db/session.hpp"
#include "messages/interfaces.hpp"

namespace waggle {

struct heartbeat_prober_state;
using heartbeat_prober_ptr = heartbeat_prober_actor::stateful_pointer<heartbeat_prober_state>;

struct heartbeat_prober_state {
  static inline const char* name = "heartbeat_prober";

  heartbeat_prober_ptr self = nullptr;
  std::unique_ptr<db::session> session;
  std::shared_ptr<heartbeat_ring> ring;
  node_env env;
  caf::timespan interval{};
  bool rotation_due = false;
  int64_t highest_token = 0;  // the rotation's new token must exceed it
  bool warned_unprovable = false;

  void init(heartbeat_prober_ptr self_ptr, std::string database_url,
            std::shared_ptr<heartbeat_ring> r, node_env e, caf::timespan every);
  void on_tick();

 private:
  void probe(pqxx::connection& conn);
  void rotate(pqxx::connection& conn);
};

// A zero interval disables the timer (heartbeat_tick still works when sent).
heartbeat_prober_actor::behavior_type
heartbeat_prober_actor_impl(heartbeat_prober_ptr self, std::string database_url,
                            std::shared_ptr<heartbeat_ring> ring, node_env env,
                            caf::timespan interval);

}  // namespace waggle
