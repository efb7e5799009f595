#pragma once

// A group session: one of the group actor's writer connections
// (--group-sessions of them), spawned detached (libpqxx blocks). It runs
// NIP-29 commands, roster publications, the start-up repair and the fence
// probe, one at a time, as the group actor deals them. It alone holds the
// relay's secret key (it signs 39000/39001/39002); the key is never logged
// and never travels in a message.

#include <memory>
#include <string>

#include "db/session.hpp"
#include "actors/support/env.hpp"
#include "db/group_store.hpp"
#include "messages/interfaces.hpp"

namespace waggle {

struct group_session_state;
using group_session_ptr = group_session_actor::stateful_pointer<group_session_state>;

struct group_session_state {
  static inline const char* name = "group_session";

  group_session_ptr self = nullptr;
  std::unique_ptr<db::session> session;
  db::relay_signer signer;
  node_env env;  // "group_session" (the first), "group_session-1", ...: its trace records

  void init(group_session_ptr self_ptr, std::string database_url, db::relay_signer relay_signer,
            node_env e, std::string name);
  group_command_reply on_command(const group_command_request& req);
  roster_publish_reply on_publish(const roster_publish_request& req);
  roster_repair_reply on_repair(const roster_repair_request& req);
  fence_probe_reply on_fence_probe();

 private:
  template <class Fn>
  status with_connection(const char* what, Fn&& fn);
};

// The name of the `index`th session in logs and traces.
std::string group_session_name(size_t index);

group_session_actor::behavior_type group_session_actor_impl(group_session_ptr self,
                                                            std::string database_url,
                                                            db::relay_signer signer, node_env env,
                                                            std::string name = "group_session");

}  // namespace waggle
