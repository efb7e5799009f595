#include "actors/channels/ttl_reaper.hpp"

#include <pqxx/except>

#include "actors/support/log.hpp"
#include "db/group_store.hpp"

namespace waggle {

namespace {
// Per sweep; the next tick takes the rest.
constexpr int max_archived_per_sweep = 500;
}  // namespace

void ttl_reaper_state::init(ttl_reaper_ptr self_ptr, std::string database_url, group_actor g,
                            caf::timespan every) {
  self = self_ptr;
  session = std::make_unique<db::session>(std::move(database_url), "ttl-reaper",
                                          std::vector<std::string>{}, log::session_report);
  group = std::move(g);
  interval = every;
  if (interval.count() > 0)
    self->delayed_send(self, interval, reap_tick{});
}

void ttl_reaper_state::on_tick() {
  if (interval.count() > 0)
    self->delayed_send(self, interval, reap_tick{});
  auto* conn = session->get();
  if (!conn)
    return;
  try {
    auto archived = db::archive_expired_channels(*conn, max_archived_per_sweep);
    if (archived.empty())
      return;
    log::info("ttl_reaper", "archived expired channels",
              {{"count", std::to_string(archived.size())}});
    self->send(group, channels_archived{std::move(archived)});
  } catch (const pqxx::broken_connection&) {
    session->reset();
  } catch (const std::exception& e) {
    log::error("ttl_reaper", "sweep failed", {{"error", e.what()}});
  }
}

ttl_reaper_actor::behavior_type ttl_reaper_actor_impl(ttl_reaper_ptr self, std::string database_url,
                                                      group_actor group, caf::timespan interval) {
  self->state.init(self, std::move(database_url), std::move(group), interval);
  return {
    // -- timers -----------------------------------------------------------------
    [self](reap_tick) { self->state.on_tick(); },
  };
}

}  // namespace waggle
