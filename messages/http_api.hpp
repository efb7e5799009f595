#pragma once

// The messages of the node's NIP-98 HTTP API actor (actors/node/http_api_actor.hpp):
// a NIP-86 call and a listener registration, each as the gateway took it. Listed in the
// one type-ID block, messages/type_ids.hpp.

#include <string>

#include <caf/meta/type_name.hpp>

namespace waggle {

// Node -> HTTP API actor: a NIP-86 JSON-RPC call (POST). Its Authorization is
// verified on the actor, never on an io thread.
struct manage_call_in {
  std::string authorization;
  std::string host;    // the Host header, as sent (NIP-98 compares it)
  std::string target;  // path and query
  std::string body;
};

// Node -> HTTP API actor: POST (register) or GET (list)
// /operator/listener/pubkeys.
struct listener_call_in {
  bool list = false;  // GET: its token binds no body
  std::string authorization;
  std::string host;
  std::string target;
  std::string body;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, manage_call_in& x) {
  return f(caf::meta::type_name("manage_call_in"), x.authorization, x.host, x.target, x.body);
}
// Node -> HTTP API actor: GET /cluster (docs/scaling.md), an operator's.
struct cluster_call_in {
  std::string authorization;
  std::string host;
  std::string target;
};
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, cluster_call_in& x) {
  return f(caf::meta::type_name("cluster_call_in"), x.authorization, x.host, x.target);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, listener_call_in& x) {
  return f(caf::meta::type_name("listener_call_in"), x.list, x.authorization, x.host, x.target,
           x.body);
}

}  // namespace waggle
