#include "actors/reads/heartbeat_prober.hpp"

#include <pqxx/except>

#include "actors/support/log.hpp"
#include "actors/support/metrics.hpp"
#include "db/heartbeat.hpp"

namespace waggle {

void heartbeat_prober_state::init(heartbeat_prober_ptr self_ptr, std::string database_url,
                                  std::shared_ptr<heartbeat_ring> r, node_env e,
                                  caf::timespan every) {
  self = self_ptr;
  session = std::make_unique<db::session>(std::move(database_url), "heartbeat-prober",
                                          std::vector<std::string>{}, log::session_report);
  ring = std::move(r);
  env = std::move(e);
  interval = every;
  if (interval.count() > 0)
    self->delayed_send(self, interval, heartbeat_tick{});
}

void heartbeat_prober_state::on_tick() {
  if (interval.count() > 0)
    self->delayed_send(self, interval, heartbeat_tick{});
  auto* conn = session->get();
  if (!conn)
    return;  // the ring ages and goes stale: routed reads go to the writer
  try {
    if (rotation_due)
      rotate(*conn);
    else
      probe(*conn);
  } catch (const pqxx::broken_connection&) {
    session->reset();
  } catch (const std::exception& e) {
    log::error("heartbeat_prober", "probe failed", {{"error", e.what()}});
  }
}

void heartbeat_prober_state::probe(pqxx::connection& conn) {
  // Read before the probe is sent: a write acknowledged before this instant
  // committed before the probe's statement started.
  auto sampled = ring_entry::clock::now();
  auto p = db::probe_heartbeat(conn);
  const int64_t seen_before_probe = highest_token;
  highest_token = std::max(highest_token, p.token);
  // Another epoch is a fresh history only if its token is above every token
  // seen: a real rotation always moves past them. An older token there means
  // a history that went back (a restored backup of an earlier epoch), whose
  // old replicas would otherwise validate again (red-team finding 4).
  bool epoch_went_back = ring->snapshot()->epoch != p.epoch && p.token <= seen_before_probe;
  if (epoch_went_back) {
    log::warn("heartbeat_prober", "heartbeat epoch changed to an older token: rotating the epoch",
              {{"token", std::to_string(p.token)}, {"epoch", p.epoch}});
    ring->reset(p.epoch);
    rotation_due = true;
    rotate(conn);
    return;
  }
  if (!p.provable) {
    if (!warned_unprovable)
      log::warn("heartbeat_prober",
                "cannot see every open transaction of this database (another role without "
                "pg_read_all_stats, a prepared transaction, or track_activities off): replica "
                "reads stay on the writer",
                {});
    warned_unprovable = true;
    return;
  }
  warned_unprovable = false;
  ring_entry e{p.token, p.fence_raw, p.floor_secs, sampled};
  switch (ring->push(p.epoch, e)) {
    case heartbeat_ring::push_result::appended:
      break;
    case heartbeat_ring::push_result::epoch_changed:
      log::info("heartbeat_prober", "heartbeat epoch", {{"epoch", p.epoch}});
      break;
    case heartbeat_ring::push_result::regression:
      log::warn("heartbeat_prober", "heartbeat token went backwards: rotating the epoch",
                {{"token", std::to_string(p.token)}, {"epoch", p.epoch}});
      rotation_due = true;
      rotate(conn);
      return;
  }
  if (env.stats)
    env.stats->heartbeat_newest_ns = sampled.time_since_epoch().count();
}

void heartbeat_prober_state::rotate(pqxx::connection& conn) {
  auto p = db::rotate_heartbeat_epoch(conn, highest_token);
  highest_token = std::max(highest_token, p.token);
  ring->reset(p.epoch);
  rotation_due = false;
  if (env.stats)
    ++env.stats->heartbeat_epoch_rotations;
  log::info("heartbeat_prober", "heartbeat epoch rotated", {{"epoch", p.epoch}});
}

heartbeat_prober_actor::behavior_type
heartbeat_prober_actor_impl(heartbeat_prober_ptr self, std::string database_url,
                            std::shared_ptr<heartbeat_ring> ring, node_env env,
                            caf::timespan interval) {
  self->state.init(self, std::move(database_url), std::move(ring), std::move(env), interval);
  return {
    // -- timers -----------------------------------------------------------------
    [self](heartbeat_tick) { self->state.on_tick(); },
  };
}

}  // namespace waggle
