#pragma once

// A writer session: one writer connection, one batch at a time. Spawned
// detached because it blocks in libpqxx.

#include <memory>
#include <string>

#include "actors/support/env.hpp"
#include "db/push_store.hpp"
#include "db/session.hpp"
#include "messages/interfaces.hpp"

namespace waggle {

struct writer_session_state;
using writer_session_ptr = writer_session_actor::stateful_pointer<writer_session_state>;

struct writer_session_state {
  static inline const char* name = "writer_session";

  writer_session_ptr self = nullptr;
  std::unique_ptr<db::session> session;
  node_env env;  // named after the session ("writer-0"): its trace records
  db::lease_settings leases;

  void init(writer_session_ptr self_ptr, std::string database_url, std::string role, node_env e,
            db::lease_settings l);
  write_batch_reply on_write_batch(const write_batch_request& req);
  fence_probe_reply on_fence_probe();
};

writer_session_actor::behavior_type writer_session_actor_impl(writer_session_ptr self,
                                                              std::string database_url,
                                                              std::string role, node_env env,
                                                              db::lease_settings leases = {});

}  // namespace waggle
