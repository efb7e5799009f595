#pragma once

// The expiration reaper (NIP-40): every `interval` it deletes the events whose
// expiration has passed, with their tag rows (db::reap_expired_events), in
// bounded transactions. Reads stopped serving those events the second they
// expired; this keeps the table and its indexes from carrying them. Detached,
// with its own connection, so a slow sweep never delays anything else. The
// timer tick is a typed input (expiry_tick), so tests can send it by hand.

#include <memory>
#include <string>

#include "actors/support/env.hpp"
#include "db/expiration_store.hpp"
#include "db/session.hpp"
#include "messages/interfaces.hpp"

namespace waggle {

struct expiration_reaper_state;
using expiration_reaper_ptr = expiration_reaper_actor::stateful_pointer<expiration_reaper_state>;

struct expiration_reaper_state {
  static inline const char* name = "expiration_reaper";

  expiration_reaper_ptr self = nullptr;
  std::unique_ptr<db::session> session;
  node_env env;
  caf::timespan interval{};
  db::reap_limits limits;

  void init(expiration_reaper_ptr self_ptr, std::string database_url, node_env e,
            caf::timespan every, db::reap_limits l);
  void on_tick();
};

// A zero interval disables the timer (expiry_tick still works when sent).
expiration_reaper_actor::behavior_type
expiration_reaper_actor_impl(expiration_reaper_ptr self, std::string database_url, node_env env,
                             caf::timespan interval, db::reap_limits limits);

}  // namespace waggle
