#pragma once

// A delivery slot: one of the supervisor's fixed number of senders. It takes
// one delivery_attempt at a time, makes its one HTTP POST (NIP-98-signed by
// the relay key, X-Waggle-Delivery-Id), and reports the answer to the
// supervisor as delivery_done. The answer comes back from the HTTP client's
// thread as a message (delivery_response_in), the slot's boundary input.
// It never retries by itself: what an answer means is the supervisor's call.

#include <memory>
#include <optional>
#include <string>

#include "actors/support/env.hpp"
#include "gateway/http_client.hpp"
#include "messages/interfaces.hpp"

namespace waggle {

struct delivery_slot_settings {
  uint32_t index = 0;
  std::string relay_secret;  // 64 hex, signs the NIP-98 Authorization
  std::chrono::milliseconds timeout{5000};
};

struct delivery_slot_state;
using delivery_slot_ptr = delivery_slot_actor::stateful_pointer<delivery_slot_state>;

struct delivery_slot_state {
  static inline const char* name = "delivery_slot";

  delivery_slot_ptr self = nullptr;
  delivery_supervisor_actor supervisor;
  std::shared_ptr<gateway::http_client> http;
  delivery_slot_settings settings;
  node_env env;
  std::optional<delivery_job> current;

  void init(delivery_slot_ptr self_ptr, delivery_supervisor_actor sup,
            std::shared_ptr<gateway::http_client> client, delivery_slot_settings s, node_env e);
  void on_attempt(delivery_attempt& a);
  void on_response(delivery_response_in& in);
};

delivery_slot_actor::behavior_type
delivery_slot_actor_impl(delivery_slot_ptr self, delivery_supervisor_actor supervisor,
                         std::shared_ptr<gateway::http_client> http,
                         delivery_slot_settings settings, node_env env);

}  // namespace waggle
