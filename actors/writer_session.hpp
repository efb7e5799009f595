#pragma once

// A writer session: one writer connection, one batch at a time. Spawned
// detached because it blocks in libpqxx.

#include <memory>
#include <string>

#include "actors/db_session.hpp"
#include "actors/env.hpp"
#include "messages/interfaces.hpp"

namespace waggle {

struct writer_state {
  std::unique_ptr<db_session> session;
  node_env env;  // named after the session ("writer-0"): its trace records
  static inline const char* name = "writer_session";
};

writer_actor::behavior_type writer_session_impl(writer_actor::stateful_pointer<writer_state> self,
                                                std::string database_url, std::string role,
                                                node_env env);

}  // namespace waggle
