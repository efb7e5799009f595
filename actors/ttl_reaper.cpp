#include "actors/ttl_reaper.hpp"

#include <pqxx/except>

#include "actors/log.hpp"
#include "db/group_store.hpp"

namespace waggle {

namespace {
// Per sweep; the next tick takes the rest.
constexpr int max_archived_per_sweep = 500;
}  // namespace

reaper_actor::behavior_type ttl_reaper_impl(reaper_actor::stateful_pointer<reaper_state> self,
                                            std::string database_url, group_actor group,
                                            caf::timespan interval) {
  auto& st = self->state;
  st.session = std::make_unique<db_session>(std::move(database_url), "ttl-reaper");
  st.group = std::move(group);
  st.interval = interval;
  if (interval.count() > 0)
    self->delayed_send(self, interval, reap_tick{});
  return {
    [self](reap_tick) {
      auto& st = self->state;
      if (st.interval.count() > 0)
        self->delayed_send(self, st.interval, reap_tick{});
      auto* conn = st.session->get();
      if (!conn)
        return;
      try {
        auto archived = db::archive_expired_channels(*conn, max_archived_per_sweep);
        if (archived.empty())
          return;
        log::info("ttl_reaper", "archived expired channels",
                  {{"count", std::to_string(archived.size())}});
        self->send(st.group, channels_archived{std::move(archived)});
      } catch (const pqxx::broken_connection&) {
        st.session->reset();
      } catch (const std::exception& e) {
        log::error("ttl_reaper", "sweep failed", {{"error", e.what()}});
      }
    },
  };
}

}  // namespace waggle
