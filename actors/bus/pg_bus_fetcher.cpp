#include "actors/bus/pg_bus_fetcher.hpp"

#include <pqxx/nontransaction>

#include "actors/bus/pg_bus_listener.hpp"
#include "actors/support/log.hpp"

namespace waggle {


bool bus_fetcher_state::connect() {
  if (conn && conn->is_open())
    return true;
  try {
    conn = std::make_unique<pqxx::connection>(settings.database_url);
    std::string started;
    {
      pqxx::nontransaction tx(*conn);
      started = tx.exec("SELECT pg_postmaster_start_time()::text")[0][0].c_str();
    }
    if (!server_started.empty() && started != server_started) {
      // After a crash (or a failover) the transaction ids whose WAL was lost
      // are handed out again, below what our snapshots saw: a snapshot from
      // before the restart would take their new rows for old ones. So every
      // shard is read from the server's start instead (nothing published
      // since was read yet), and its subscribers are told they may have lost
      // what the crash took.
      log::warn("bus", "the database server restarted: shards are read from its start time");
      for (auto& [id, s] : shards)
        s.restarted_at = started;
    }
    server_started = started;
    registry_dirty = true;
    sync_registry();
    return true;
  } catch (const std::exception& e) {
    lose_connection(e);
    return false;
  }
}

void bus_fetcher_state::lose_connection(const std::exception& e) {
  if (conn)
    log::warn("bus", "fetcher lost its connection", {{"error", e.what()}});
  conn.reset();
}

void bus_fetcher_state::sync_registry() {
  if (!registry_dirty)
    return;
  db::bus::register_node(*conn, db::bus::node_row{settings.node_id, settings.address,
                                                  settings.port, db::bus::protocol_version});
  for (const auto& [key, n] : registered)
    db::bus::set_subscribed(*conn, settings.node_id, key.first, key.second,
                            static_cast<int64_t>(bus_subject_hash(key.first)), true);
  registry_dirty = false;
}

void bus_fetcher_state::tell_listener() {
  std::vector<int32_t> wanted;
  for (const auto& [id, s] : shards)
    wanted.push_back(id);
  self->send(listener, bus_shards{std::move(wanted)});
}

caf::result<bus_ack> bus_fetcher_state::watch(bus_watch& w) {
  const auto id = static_cast<int32_t>(bus_shard_of(w.subject));
  const auto key = std::make_pair(w.subject, w.group);
  if (!w.add) {
    auto it = shards.find(id);
    if (it == shards.end())
      return bus_ack{};
    auto& wt = it->second.subjects[w.subject];
    if (w.inbox) {
      --wt.inboxes;
    } else {
      if (w.group.empty())
        --wt.plain;
      else if (--wt.groups[w.group] <= 0)
        wt.groups.erase(w.group);
      if (--registered[key] <= 0) {
        registered.erase(key);
        try {
          if (!conn)
            throw std::runtime_error("not connected");
          db::bus::set_subscribed(*conn, settings.node_id, w.subject, w.group,
                                  static_cast<int64_t>(bus_subject_hash(w.subject)), false);
        } catch (const std::exception& e) {
          registry_dirty = true;  // rewritten whole on the next connect or poll
          lose_connection(e);
        }
      }
    }
    if (wt.empty())
      it->second.subjects.erase(w.subject);
    if (it->second.subjects.empty()) {
      shards.erase(it);
      tell_listener();
    }
    return bus_ack{};
  }
  if (!connect())
    return make_error(bus_errc::unavailable, "the bus database cannot be reached");
  try {
    auto it = shards.find(id);
    const bool fresh = it == shards.end();
    if (fresh) {
      shard s;
      s.since = db::bus::current_snapshot(*conn);
      s.drained = env.steady_now();
      it = shards.emplace(id, std::move(s)).first;
    } else {
      // Hand over what committed before this watch, so that the new
      // subscriber, added by the facade when this reply arrives, gets only
      // what commits after.
      drain(id, it->second);
    }
    if (!w.inbox && registered.count(key) == 0)
      db::bus::set_subscribed(*conn, settings.node_id, w.subject, w.group,
                              static_cast<int64_t>(bus_subject_hash(w.subject)), true);
    auto& wt = it->second.subjects[w.subject];
    if (w.inbox)
      ++wt.inboxes;
    else if (w.group.empty())
      ++wt.plain;
    else
      ++wt.groups[w.group];
    if (!w.inbox)
      ++registered[key];
    if (fresh)
      tell_listener();
    return bus_ack{};
  } catch (const std::exception& e) {
    registry_dirty = true;
    if (auto it = shards.find(id); it != shards.end() && it->second.subjects.empty())
      shards.erase(it);
    lose_connection(e);
    return make_error(bus_errc::unavailable, e.what());
  }
}

void bus_fetcher_state::drain(int32_t id, shard& s) {
  std::vector<std::string> subjects;
  for (const auto& [subject, w] : s.subjects)
    subjects.push_back(subject);
  std::string upto;
  std::optional<std::pair<std::string, int64_t>> after;
  const auto previous = s.drained;
  for (;;) {
    auto page = db::bus::fetch(*conn, id, s.since, upto, after, subjects, settings.fetch,
                               s.restarted_at);
    if (env.stats)
      ++env.stats->bus.fetch_pages;
    bus_fetched out;
    std::vector<int64_t> ids;
    std::vector<std::pair<int64_t, std::string>> wanted;
    for (auto& row : page.rows) {
      if (auto w = s.subjects.find(row.subject); w != s.subjects.end())
        for (const auto& [group, n] : w->second.groups)
          wanted.emplace_back(row.id, group);
      if (env.stats)
        env.stats->bus.lag_ms = static_cast<int64_t>(row.age_ms);
      ids.push_back(row.id);
      out.messages.push_back(
        bus_message{std::move(row.subject), std::move(row.payload), std::move(row.reply_to)});
    }
    out.groups.resize(out.messages.size());
    if (!wanted.empty()) {
      std::map<int64_t, size_t> index;
      for (size_t i = 0; i < ids.size(); ++i)
        index[ids[i]] = i;
      for (auto& [message, group] : db::bus::claim(*conn, settings.node_id, wanted))
        out.groups[index[message]].push_back(std::move(group));
    }
    if (!out.messages.empty())
      self->send(facade, std::move(out));
    if (!page.more) {
      s.since = std::move(page.snapshot);
      break;
    }
    upto = page.snapshot;
    after = std::make_pair(page.rows.back().xid, page.rows.back().id);
  }
  auto now = env.steady_now();
  // Unread for longer than the retention (garbage collection may have taken
  // messages this node never read), or read across a server restart.
  const bool restarted = !s.restarted_at.empty();
  s.restarted_at.clear();
  if (restarted || now - previous > settings.retention) {
    bus_fetched lag;
    lag.lagged = subjects;
    self->send(facade, std::move(lag));
  }
  s.drained = now;
}

void bus_fetcher_state::fetch(const std::vector<int32_t>& which) {
  if (!connect())
    return;
  try {
    sync_registry();
    if (which.empty()) {
      for (auto& [id, s] : shards)
        drain(id, s);
    } else {
      for (auto id : which)
        if (auto it = shards.find(id); it != shards.end())
          drain(id, it->second);
    }
  } catch (const std::exception& e) {
    lose_connection(e);
  }
}

void bus_fetcher_state::poll() {
  fetch({});
  self->delayed_send(self, settings.poll, bus_tick{0});
}

bus_fetcher_actor::behavior_type bus_fetcher_impl(bus_fetcher_state::ptr self,
                                                  pg_bus_settings settings, pg_bus_actor facade,
                                                  node_env env) {
  auto& st = self->state;
  st.self = self;
  st.settings = std::move(settings);
  st.facade = std::move(facade);
  st.env = std::move(env);
  st.listener = self->spawn<caf::detached + caf::linked>(
    bus_listener_impl, st.settings, bus_fetcher_actor{self}, st.env.for_actor("bus-listener"));
  self->send(self, bus_tick{0});
  return {
    [self](bus_watch& w) { return self->state.watch(w); },
    [self](bus_shards& s) { self->state.fetch(s.shards); },
    [self](bus_listening q) { return self->delegate(self->state.listener, q); },
    [self](bus_tick t) {
      if (t.kind == 0) {
        self->state.poll();
      } else {
        // The keeper found the node's registry row gone (expired by a peer).
        self->state.registry_dirty = true;
        self->state.fetch({});
      }
    },
  };
}

}  // namespace waggle
