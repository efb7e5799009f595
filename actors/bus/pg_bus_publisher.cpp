#include "actors/bus/pg_bus_publisher.hpp"

#include <set>

#include "actors/support/log.hpp"

namespace waggle {

bus_batch_stored bus_publisher_state::store(bus_store_batch& batch) {
  std::vector<db::bus::outgoing> rows;
  rows.reserve(batch.messages.size());
  for (auto& m : batch.messages)
    rows.push_back(db::bus::outgoing{static_cast<int>(bus_shard_of(m.subject)),
                                     static_cast<int64_t>(bus_subject_hash(m.subject)),
                                     std::move(m.subject), std::move(m.reply_to),
                                     std::move(m.payload), m.needs_responders});
  bus_batch_stored out;
  try {
    if (!conn)
      conn = db::bus::open(settings.database_url, "publisher", settings.statement_timeout);
    auto stored = db::bus::publish(*conn, rows, settings.node_ttl);
    std::set<int32_t> dirty;
    for (size_t i = 0; i < stored.size(); ++i) {
      out.ids.push_back(stored[i].id);
      if (stored[i].id != 0)
        dirty.insert(rows[i].shard);
    }
    if (!dirty.empty())
      self->send(doorbell, bus_shards{std::vector<int32_t>(dirty.begin(), dirty.end())});
  } catch (const std::exception& e) {
    // Not knowing whether a broken COMMIT landed, the batch is reported
    // failed: its publishers may see it delivered anyway (docs/bus.md).
    conn.reset();
    out.ids.clear();
    out.error = e.what();
    log::warn("bus", "publish failed", {{"error", e.what()}});
  }
  return out;
}

bus_publisher_actor::behavior_type bus_publisher_impl(bus_publisher_state::ptr self,
                                                      pg_bus_settings settings,
                                                      bus_doorbell_actor doorbell, node_env env) {
  self->state.self = self;
  self->state.settings = std::move(settings);
  self->state.doorbell = std::move(doorbell);
  self->state.env = std::move(env);
  // Connected now, not at the first publish: a node started while the
  // server's connection slots were free keeps its connection when they fill.
  try {
    self->state.conn = db::bus::open(self->state.settings.database_url, "publisher",
                                     self->state.settings.statement_timeout);
  } catch (const std::exception& e) {
    log::warn("bus", "publisher cannot connect yet", {{"error", e.what()}});
  }
  return {
    [self](bus_store_batch& batch) { return self->state.store(batch); },
  };
}

}  // namespace waggle
