#pragma once

// The listener registry (docs/delivery.md, "Registration"): answers
// POST/GET /operator/listener/pubkeys after the node checked NIP-98 and that
// the key is a configured listener, and reaps what has aged out:
// registrations after 30 days, outbox rows after the retention (15 min),
// each counted. Detached, with its own connection; its timer is a typed
// input (listener_reap_tick), so tests can send it by hand.

#include <memory>
#include <string>

#include "actors/support/env.hpp"
#include "db/session.hpp"
#include "messages/interfaces.hpp"

namespace waggle {

// {"error": message}: every refusal of the registration endpoint.
std::string json_error_body(std::string_view message);

struct listener_registry_settings {
  std::string database_url;
  size_t max_pubkeys = 1000;  // per request
  // Per (listener, community): the table grows only by what a listener
  // registers, and a key is trusted with deliveries, not with the database.
  size_t max_registrations = 10000;
  std::chrono::seconds registration_ttl{30 * 24 * 3600};
  std::chrono::seconds outbox_retention{900};
  caf::timespan reap_interval = std::chrono::seconds(60);  // 0: no timer
};

struct listener_registry_state {
  static inline const char* name = "listener_registry";

  using ptr = listener_registry_actor::stateful_pointer<listener_registry_state>;
  ptr self = nullptr;
  std::unique_ptr<db::session> session;
  listener_registry_settings settings;
  node_env env;

  void init(ptr self_ptr, listener_registry_settings s, node_env e);
  listener_registration_reply on_request(const listener_registration_request& req);
  void on_reap();
};

listener_registry_actor::behavior_type
listener_registry_actor_impl(listener_registry_state::ptr self, listener_registry_settings settings,
                             node_env env);

}  // namespace waggle
