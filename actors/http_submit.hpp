#pragma once

// The HTTP submit actor: one short-lived actor per POST /events. The body
// arrives as a message, so parsing and the signature check run on scheduler
// threads, never on an io thread. It admits the event with the NIP-98 pubkey
// as the only authenticated key, sends it where a WebSocket EVENT would go
// (ingest, the group actor for NIP-29 commands, the hub if ephemeral),
// calls `done` once with the answer, and quits.

#include <functional>
#include <string>

#include "actors/admission.hpp"
#include "actors/env.hpp"
#include "gateway/node_api.hpp"
#include "messages/interfaces.hpp"

namespace waggle {

struct http_submit_context {
  int64_t community_id = 0;
  std::string relay_pubkey;
  std::string auth_pubkey;  // proven by NIP-98
  admission_policy policy;
  ingest_actor ingest;
  hub_actor hub;
  group_actor group;
  node_env env;  // named "http-N" in traces
  std::function<void(gateway::http_event_reply)> done;
};

// Send it the body as a socket_frame.
caf::behavior http_submit_impl(caf::event_based_actor* self, http_submit_context ctx);

}  // namespace waggle
