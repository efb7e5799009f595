#include "actors/expiry/expiration_reaper.hpp"

#include <pqxx/except>

#include "actors/support/log.hpp"

namespace waggle {

void expiration_reaper_state::init(expiration_reaper_ptr self_ptr, std::string database_url,
                                   node_env e, caf::timespan every, db::reap_limits l) {
  self = self_ptr;
  session = std::make_unique<db::session>(std::move(database_url), "expiration-reaper",
                                          std::vector<std::string>{}, log::session_report);
  env = std::move(e);
  interval = every;
  limits = l;
  if (interval.count() > 0)
    self->delayed_send(self, interval, expiry_tick{});
}

void expiration_reaper_state::on_tick() {
  if (interval.count() > 0)
    self->delayed_send(self, interval, expiry_tick{});
  auto* conn = session->get();
  if (!conn)
    return;
  try {
    // The clock's source, not env.unix_now(): the reaper has no counterpart
    // in a trace replay, so a recorded reading would be one no replay takes.
    auto reaped = db::reap_expired_events(*conn, env.sources.unix_now(), limits);
    if (env.stats)
      env.stats->expired_events_reaped += reaped.events;
    if (reaped.events == 0)
      return;
    log::info("expiration_reaper", "deleted expired events",
              {{"count", std::to_string(reaped.events)},
               {"transactions", std::to_string(reaped.transactions)},
               {"more_due", reaped.more ? "yes" : "no"}});
  } catch (const pqxx::broken_connection&) {
    session->reset();
  } catch (const std::exception& e) {
    log::error("expiration_reaper", "sweep failed", {{"error", e.what()}});
  }
}

expiration_reaper_actor::behavior_type
expiration_reaper_actor_impl(expiration_reaper_ptr self, std::string database_url, node_env env,
                             caf::timespan interval, db::reap_limits limits) {
  self->state.init(self, std::move(database_url), std::move(env), interval, limits);
  return {
    // -- timers -----------------------------------------------------------------
    [self](expiry_tick) { self->state.on_tick(); },
  };
}

}  // namespace waggle
