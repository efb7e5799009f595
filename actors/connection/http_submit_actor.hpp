#pragma once

// The HTTP submit actor: one short-lived actor per POST /events. The request
// arrives as a message, so NIP-98, parsing and the signature checks run on
// scheduler threads, never on an io thread. What it shares with a WebSocket
// EVENT it takes from the same places: classify_event (admission), request_store
// (ingest or the group actor) and messages/outcome.hpp (the answer, here with
// its HTTP status). What differs: the only authenticated key is the one NIP-98
// proved, ephemeral events in channels are refused, and `done` is called once
// with the answer before the actor quits.

#include <functional>
#include <optional>
#include <string>

#include "actors/connection/connection_actor.hpp"
#include "actors/support/env.hpp"
#include "actors/support/seen_tokens.hpp"
#include "gateway/node_api.hpp"
#include "messages/interfaces.hpp"

namespace waggle {

struct http_submit_context {
  connection_settings settings;  // community, relay key, admission policy, timeouts
  ingest_actor ingest;
  hub_actor hub;
  group_actor group;
  reader_actor reader;          // the community access check of ephemeral events
  membership_actor membership;  // NIP-43 join and leave requests
  write_policy_actor policy;  // null without --write-policy
  node_env env;  // named "http-N" in traces
  std::shared_ptr<seen_tokens> seen;  // the node's used NIP-98 tokens; null: not checked
  std::function<void(gateway::http_event_reply)> done;
};

struct http_submit_state;
using http_submit_ptr = http_submit_actor::stateful_pointer<http_submit_state>;

struct http_submit_state {
  static inline const char* name = "http_submit";

  http_submit_ptr self = nullptr;
  http_submit_context ctx;

  void init(http_submit_ptr self_ptr, http_submit_context context);
  // NIP-98 and an empty body are answered here; the rest is an event.
  std::optional<http_event_in> authorize(http_request_in& req);
  void on_event(const http_event_in& in);

 private:
  void fan_out(const event_ptr& ev);
  void dispatch(const event_ptr& ev, route where);
  void finish(const std::string& id, const answer& a, bool counted = true);
};

http_submit_actor::behavior_type http_submit_actor_impl(http_submit_ptr self,
                                                        http_submit_context ctx);

}  // namespace waggle
