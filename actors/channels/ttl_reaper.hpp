#pragma once

// The TTL reaper: every `interval` it archives the ephemeral channels whose
// deadline passed (db::archive_expired_channels) and tells the group actor,
// which republishes their 39000. Detached, with its own connection, so a
// slow sweep never delays a command. The timer tick is a typed input
// (reap_tick), so traces record it and tests can send it by hand.

#include <memory>
#include <string>

#include "db/session.hpp"
#include "messages/interfaces.hpp"

namespace waggle {

struct ttl_reaper_state;
using ttl_reaper_ptr = ttl_reaper_actor::stateful_pointer<ttl_reaper_state>;

struct ttl_reaper_state {
  static inline const char* name = "ttl_reaper";

  ttl_reaper_ptr self = nullptr;
  std::unique_ptr<db::session> session;
  group_actor group;
  caf::timespan interval{};

  void init(ttl_reaper_ptr self_ptr, std::string database_url, group_actor g, caf::timespan every);
  void on_tick();
};

// A zero interval disables the timer (reap_tick still works when sent).
ttl_reaper_actor::behavior_type ttl_reaper_actor_impl(ttl_reaper_ptr self, std::string database_url,
                                                      group_actor group, caf::timespan interval);

}  // namespace waggle
