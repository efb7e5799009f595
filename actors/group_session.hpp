#pragma once

// The group session: the group actor's own writer connection, spawned
// detached (libpqxx blocks). It runs NIP-29 commands, roster publications,
// the start-up repair and the fence probe, one at a time. It alone holds the
// relay's secret key (it signs 39000/39001/39002); the key is never logged
// and never travels in a message.

#include <memory>
#include <string>

#include "actors/db_session.hpp"
#include "actors/env.hpp"
#include "db/group_store.hpp"
#include "messages/interfaces.hpp"

namespace waggle {

struct group_session_state {
  std::unique_ptr<db_session> session;
  db::relay_signer signer;
  node_env env;  // "group_session": its trace records
  static inline const char* name = "group_session";
};

group_session_actor::behavior_type
group_session_impl(group_session_actor::stateful_pointer<group_session_state> self,
                   std::string database_url, db::relay_signer signer, node_env env);

}  // namespace waggle
