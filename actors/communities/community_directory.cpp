#include "actors/communities/community_directory.hpp"

#include <algorithm>
#include <map>
#include <utility>

#include <pqxx/except>

#include "actors/support/log.hpp"
#include "db/management_store.hpp"
#include "db/migrate.hpp"

namespace waggle {

std::optional<community> community_snapshot::find(std::string_view host) const {
  auto current = std::atomic_load(&map_);
  auto i = current->find(normalize_host(host));
  if (i == current->end() || i->second.archived)
    return std::nullopt;
  return i->second;
}

void community_snapshot::publish(map m) {
  auto before = std::atomic_load(&map_);
  auto after = std::make_shared<const map>(std::move(m));
  std::atomic_store(&map_, std::shared_ptr<const map>(after));
  // After the store: a connection that the gateway let in under the old
  // snapshot is closed below; one that comes later is refused there.
  if (on_block_ && std::exchange(published_, true)) {
    std::map<int64_t, const std::vector<std::string>*> had;
    for (const auto& [host, c] : *before)
      had.emplace(c.id, &c.blocked_ips);
    for (const auto& [host, c] : *after) {
      auto i = had.find(c.id);
      for (const auto& ip : c.blocked_ips)
        if (i == had.end()
            || std::find(i->second->begin(), i->second->end(), ip) == i->second->end())
          on_block_(c.id, ip);
    }
  }
}

void community_directory_state::init(community_directory_ptr self_ptr, std::string database_url,
                                     std::shared_ptr<community_snapshot> snap,
                                     caf::timespan every) {
  self = self_ptr;
  session = std::make_unique<db::session>(std::move(database_url), "directory",
                                          std::vector<std::string>{}, log::session_report);
  snapshot = std::move(snap);
  interval = every;
  refresh();
  self->delayed_send(self, interval, refresh_tick{});
}

void community_directory_state::on_tick() {
  refresh();
  self->delayed_send(self, interval, refresh_tick{});
}

void community_directory_state::refresh() {
  auto* conn = session->get();
  if (!conn) {
    snapshot->set_ready(false);
    return;
  }
  try {
    community_snapshot::map m;
    auto blocked = db::load_blocked_ips(*conn);
    for (auto& c : db::load_communities(*conn)) {
      if (auto it = blocked.find(c.id); it != blocked.end())
        c.blocked_ips = it->second;
      m.emplace(c.host, c);
    }
    snapshot->publish(std::move(m));
    snapshot->set_ready(db::migrations_current(*conn, db::embedded_migrations()));
  } catch (const pqxx::broken_connection&) {
    session->reset();
    snapshot->set_ready(false);
  } catch (const std::exception& e) {
    log::warn("directory", "refresh failed", {{"error", e.what()}});
    snapshot->set_ready(false);
  }
}

community_directory_actor::behavior_type
community_directory_actor_impl(community_directory_ptr self, std::string database_url,
                               std::shared_ptr<community_snapshot> snapshot,
                               caf::timespan interval) {
  self->state.init(self, std::move(database_url), std::move(snapshot), interval);
  return {
    // -- timers -----------------------------------------------------------------
    [self](refresh_tick) { self->state.on_tick(); },
    [self](access_poke) { self->state.refresh_now(); },
  };
}

}  // namespace waggle
