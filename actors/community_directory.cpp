#include "actors/community_directory.hpp"

#include <pqxx/except>

#include "actors/log.hpp"
#include "db/migrate.hpp"

namespace waggle {

std::optional<db::community> community_snapshot::find(std::string_view host) const {
  auto current = std::atomic_load(&map_);
  auto i = current->find(db::normalize_host(host));
  if (i == current->end() || i->second.archived)
    return std::nullopt;
  return i->second;
}

void community_snapshot::publish(map m) {
  std::atomic_store(&map_, std::shared_ptr<const map>(std::make_shared<map>(std::move(m))));
}

namespace {

void refresh(directory_actor::stateful_pointer<directory_state> self) {
  auto& st = self->state;
  auto* conn = st.session->get();
  if (!conn) {
    st.snapshot->set_ready(false);
    return;
  }
  try {
    community_snapshot::map m;
    for (auto& c : db::load_communities(*conn))
      m.emplace(c.host, c);
    st.snapshot->publish(std::move(m));
    st.snapshot->set_ready(db::migrations_current(*conn, db::embedded_migrations()));
  } catch (const pqxx::broken_connection&) {
    st.session->reset();
    st.snapshot->set_ready(false);
  } catch (const std::exception& e) {
    log::warn("directory", "refresh failed", {{"error", e.what()}});
    st.snapshot->set_ready(false);
  }
}

}  // namespace

directory_actor::behavior_type
community_directory_impl(directory_actor::stateful_pointer<directory_state> self,
                         std::string database_url, std::shared_ptr<community_snapshot> snapshot,
                         caf::timespan interval) {
  auto& st = self->state;
  st.session = std::make_unique<db_session>(std::move(database_url), "directory");
  st.snapshot = std::move(snapshot);
  st.interval = interval;
  refresh(self);
  self->delayed_send(self, interval, refresh_tick{});
  return {
    [self](refresh_tick) {
      refresh(self);
      self->delayed_send(self, self->state.interval, refresh_tick{});
    },
  };
}

}  // namespace waggle
