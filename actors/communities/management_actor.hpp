#pragma once

// The management actor: NIP-86 JSON-RPC calls of one node
// (docs/management.md). The node's per-request actor checks NIP-98 first;
// this one decides whether the proved key may manage the community (an
// active owner or admin, or an operator key), validates the params, makes
// the change and audits the call in ONE transaction. Detached, with its own
// connection; it serialises the node's management calls, which are rare.
// Changes reach the rest of the node through the triggers of
// migrations/0004 (NOTIFY 'waggle_community': the watcher and the
// directory re-read).

#include <memory>
#include <set>
#include <string>

#include "db/session.hpp"
#include "messages/interfaces.hpp"

namespace waggle {

struct management_settings {
  std::string database_url;
  std::set<std::string> operator_pubkeys;  // hex; may manage every community
};

struct management_state;
using management_ptr = management_actor::stateful_pointer<management_state>;

struct management_state {
  static inline const char* name = "management";

  management_ptr self = nullptr;
  std::unique_ptr<db::session> session;
  management_settings settings;

  void init(management_ptr self_ptr, management_settings cfg);
  manage_reply on_request(const manage_request& req);
};

management_actor::behavior_type management_actor_impl(management_ptr self, management_settings cfg);

// The JSON body of an error answer: {"result": null, "error": "..."}.
std::string rpc_error_body(std::string_view message);

}  // namespace waggle
