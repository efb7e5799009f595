#pragma once

// The reader pool: the one address connections send reads to. It deals them
// out round-robin over the reader sessions, whose mailboxes are the queues,
// and records the order it takes them in (a replay deals them the same way).
// Replica routing will live here (docs/architecture.md, "Reader pool").

#include <vector>

#include "actors/support/env.hpp"
#include "messages/interfaces.hpp"

namespace waggle {

struct reader_pool_state;
using reader_pool_ptr = reader_pool_actor::stateful_pointer<reader_pool_state>;

struct reader_pool_state {
  static inline const char* name = "reader_pool";

  reader_pool_ptr self = nullptr;
  std::vector<reader_session_actor> sessions;
  size_t next = 0;
  node_env env;  // "reader_pool": records the order it takes reads in

  void init(reader_pool_ptr self_ptr, std::vector<reader_session_actor> all, node_env e);
  reader_session_actor& pick();
};

reader_pool_actor::behavior_type reader_pool_impl(reader_pool_ptr self,
                                                  std::vector<reader_session_actor> sessions,
                                                  node_env env);

}  // namespace waggle
