#pragma once

// The HTTP API actor: one short-lived actor per call to the node's NIP-98
// HTTP API, a NIP-86 management call (docs/management.md) or a listener
// registration (docs/delivery.md, "Registration"). The call arrives as a
// message, so NIP-98 (a signature check) runs on a scheduler thread, never on
// an io thread; the management actor or the listener registry then decides,
// and `done` is called once with the HTTP answer before the actor quits.
// In actors/node: it reads the current handles from the supervisor's board.

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>

#include "actors/node/node_supervisor.hpp"
#include "actors/support/env.hpp"
#include "actors/support/seen_tokens.hpp"
#include "gateway/node_api.hpp"
#include "messages/interfaces.hpp"
#include "messages/proto/nip98.hpp"

namespace waggle {

// How much longer than a NIP-86 call's deadline the caller waits: the
// management actor answers 504 itself by the deadline unless its commit,
// begun before it, is stuck.
inline constexpr std::chrono::milliseconds manage_answer_grace{std::chrono::seconds(5)};

struct http_api_context {
  int64_t community_id = 0;
  int64_t auth_window = 60;  // NIP-98: seconds either side of now
  management_actor management;
  // The hub (told of a NIP-86 removal) and the listener registry, as current
  // when each is needed: either may have been restarted since the call came.
  std::shared_ptr<handle_board> board;
  std::map<std::string, std::string> operator_listeners;  // pubkey -> URL
  std::set<std::string> operator_pubkeys;                  // GET /cluster
  std::string database_url;                                // GET /cluster reads the registry
  std::string node_id, bus;                                // ... and names this node
  // How long the management actor or the registry may take to answer.
  std::chrono::milliseconds answer_timeout{std::chrono::seconds(10)};
  node_env env;  // named "manage-N" or "listener-N"
  std::shared_ptr<seen_tokens> seen;  // the node's used NIP-98 tokens; null: not checked
  std::function<void(gateway::http_rpc_reply)> done;
};

struct http_api_state;
using http_api_ptr = http_api_actor::stateful_pointer<http_api_state>;

struct http_api_state {
  static inline const char* name = "http_api";

  http_api_ptr self = nullptr;
  http_api_context ctx;

  void init(http_api_ptr self_ptr, http_api_context context);
  void on_manage(manage_call_in& call);
  void on_listener(listener_call_in& call);
  // Blocks on one short query: the node spawns this call's actor detached.
  void on_cluster(cluster_call_in& call);

 private:
  void finish(gateway::http_rpc_reply reply);
  // Empty when the token is used for the first time; else the refusal.
  std::string replayed(const proto::nip98_result& auth);
};

http_api_actor::behavior_type http_api_actor_impl(http_api_ptr self, http_api_context ctx);

}  // namespace waggle
