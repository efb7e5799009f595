#pragma once

// Reader sessions serve REQ history and COUNT, each on its own connection,
// spawned detached (libpqxx blocks). The reader pool spreads requests over
// them. (Replica routing, DESIGN §7, will live in the pool.)

#include <memory>
#include <string>
#include <vector>

#include "actors/db_session.hpp"
#include "actors/env.hpp"
#include "messages/interfaces.hpp"

namespace waggle {

struct reader_state {
  std::unique_ptr<db_session> session;
  proto::filter_limits limits;
  node_env env;  // named after the session ("reader-0"): its trace records
  static inline const char* name = "reader_session";
};

reader_actor::behavior_type reader_session_impl(reader_actor::stateful_pointer<reader_state> self,
                                                std::string database_url, std::string role,
                                                proto::filter_limits limits, node_env env);

struct reader_pool_state {
  std::vector<reader_actor> sessions;
  size_t next = 0;
  node_env env;  // "reader_pool": records the order it takes reads in
  static inline const char* name = "reader_pool";
};

// Round-robin delegation: each session's mailbox is its queue.
reader_actor::behavior_type reader_pool_impl(reader_actor::stateful_pointer<reader_pool_state> self,
                                             std::vector<reader_actor> sessions, node_env env);

}  // namespace waggle
