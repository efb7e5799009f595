#pragma once

// The TTL reaper: every `interval` it archives the ephemeral channels whose
// deadline passed (db::archive_expired_channels) and tells the group actor,
// which republishes their 39000. Detached, with its own connection, so a
// slow sweep never delays a command. The timer tick is a typed input
// (reap_tick), so traces record it and tests can send it by hand.

#include <memory>
#include <string>

#include "actors/db_session.hpp"
#include "messages/interfaces.hpp"

namespace waggle {

struct reaper_state {
  std::unique_ptr<db_session> session;
  group_actor group;
  caf::timespan interval{};
  static inline const char* name = "ttl_reaper";
};

// A zero interval disables the timer (reap_tick still works when sent).
reaper_actor::behavior_type ttl_reaper_impl(reaper_actor::stateful_pointer<reaper_state> self,
                                            std::string database_url, group_actor group,
                                            caf::timespan interval);

}  // namespace waggle
