#include "actors/communities/community_watcher.hpp"

#include <pqxx/except>

#include "actors/support/log.hpp"
#include "db/membership_store.hpp"

namespace waggle {

void community_watcher_state::init(community_watcher_ptr self_ptr, std::string database_url,
                                   db::relay_signer s, hub_actor h, community_directory_actor d,
                                   node_env e, community_watcher_settings cfg) {
  self = self_ptr;
  env = e.for_actor("community_watcher");
  session = std::make_unique<db::session>(std::move(database_url), "community-watcher",
                                          std::vector<std::string>{"LISTEN waggle_community"},
                                          log::session_report);
  signer = std::move(s);
  hub = std::move(h);
  directory = std::move(d);
  settings = cfg;
  // Changes made while no node was running are published at start.
  publish_pending();
  self->delayed_send(self, settings.tick, watch_tick{});
}

void community_watcher_state::on_tick() {
  self->delayed_send(self, settings.tick, watch_tick{});
  auto* conn = session->get();
  if (!conn)
    return;
  int notified = 0;
  try {
    // Non-blocking: reads what the socket holds (LISTEN runs on every new
    // connection of this session, see init).
    notified = conn->get_notifs();
  } catch (const pqxx::broken_connection&) {
    session->reset();
    return;
  }
  if (notified > 0)
    // A community's row may have changed too (policy, NIP-11 text, blocked
    // addresses): the gateway's map is refreshed now, not at its next tick.
    self->send(directory, access_poke{});
  if (notified > 0 || ++ticks_since_poll >= settings.ticks_per_poll) {
    ticks_since_poll = 0;
    publish_pending();
  }
}

size_t community_watcher_state::publish_pending() {
  auto* conn = session->get();
  if (!conn)
    return 0;
  size_t published = 0;
  std::vector<int64_t> pending;
  try {
    pending = db::communities_with_pending_changes(*conn);
  } catch (const pqxx::broken_connection&) {
    session->reset();
    return 0;
  } catch (const std::exception& e) {
    log::error("community_watcher", "looking for changes failed", {{"error", e.what()}});
    return 0;
  }
  for (auto community_id : pending) {
    // One community's failure must not hold back the others' revocations.
    try {
      auto pub = db::publish_access_changes(*conn, community_id, signer, env.unix_now());
      ++published;
      // After COMMIT, in this order: the published state, then the ends of
      // access (a subscription that loses access still saw its own removal).
      if (!pub.events.empty()) {
        committed_events batch;
        for (auto& ev : pub.events)
          batch.items.push_back({community_id, ev});
        self->send(hub, std::move(batch));
      }
      for (auto& pk : pub.revoked)
        self->send(hub, access_revoked{community_id, pk});
      if (pub.closed)
        self->send(hub, access_revoked{community_id, ""});
      if (pub.policy_changed)
        self->send(directory, access_poke{});
    } catch (const pqxx::broken_connection&) {
      session->reset();
      return published;
    } catch (const std::exception& e) {
      log::error("community_watcher", "publication failed",
                 {{"community", std::to_string(community_id)}, {"error", e.what()}});
    }
  }
  return published;
}

community_watcher_actor::behavior_type community_watcher_actor_impl(
  community_watcher_ptr self, std::string database_url, db::relay_signer signer, hub_actor hub,
  community_directory_actor directory, node_env env, community_watcher_settings settings) {
  self->state.init(self, std::move(database_url), std::move(signer), std::move(hub),
                   std::move(directory), std::move(env), settings);
  return {
    [self](access_poke) { self->state.publish_pending(); },
    // -- timers -----------------------------------------------------------------
    [self](watch_tick) { self->state.on_tick(); },
  };
}

}  // namespace waggle
