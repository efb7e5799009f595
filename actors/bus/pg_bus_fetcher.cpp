#include "actors/bus/pg_bus_fetcher.hpp"

#include <pqxx/nontransaction>

#include "actors/bus/pg_bus_listener.hpp"
#include "actors/support/log.hpp"

namespace waggle {


bool bus_fetcher_state::connect() {
  if (conn && conn->is_open())
    return true;
  try {
    conn = db::bus::open(settings.database_url, "fetcher", settings.statement_timeout);
    auto started = db::bus::server_started(*conn);
    if (!server_started.empty() && started != server_started) {
      // A restart or a failover (a promoted standby has its own start time):
      // what was committed asynchronously just before may be gone, so every
      // subscriber hears it may have lost messages. And our snapshots are
      // of the old server: if a crash lost the WAL of some transaction ids
      // (or the standby was behind), the new server hands them out again and
      // their rows would look old to those snapshots, even once the ids have
      // climbed past them again. So every shard is read once by publish
      // time, from the database's clock just after the snapshot it had read
      // (or was paging) up to: nothing read before can come again, and
      // everything published since comes (the bus-pg-crash stage lost
      // acknowledged messages when only a regression seen at reconnect
      // switched to this).
      log::warn("bus", "the database server changed: subscribers are told they may have lagged");
      for (auto& [id, s] : shards) {
        s.lag_pending = true;
        s.restarted_at = s.read_to_at.empty() ? started : s.read_to_at;
        s.upto.clear();
        s.after.reset();
      }
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
  std::vector<db::bus::subscription_row> subscriptions;
  for (const auto& [key, n] : registered)
    subscriptions.push_back(db::bus::subscription_row{
      key.first, key.second, static_cast<int64_t>(bus_subject_hash(key.first))});
  db::bus::register_node(*conn,
                         db::bus::node_row{settings.node_id, settings.address, settings.port,
                                           db::bus::protocol_version},
                         subscriptions);
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
    auto sub = it->second.subjects.find(w.subject);
    if (sub == it->second.subjects.end())
      return bus_ack{};  // an end without its start: nothing to undo
    auto& wt = sub->second;
    if (w.inbox) {
      if (wt.inboxes > 0)
        --wt.inboxes;
    } else {
      if (w.group.empty()) {
        if (wt.plain > 0)
          --wt.plain;
      } else if (auto g = wt.groups.find(w.group); g != wt.groups.end() && --g->second <= 0) {
        wt.groups.erase(g);
      }
      if (auto r = registered.find(key); r != registered.end() && --r->second <= 0) {
        registered.erase(r);
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
      it->second.subjects.erase(sub);
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
      s.since = db::bus::current_snapshot(*conn, &s.read_to_at);
      s.drained = env.steady_now();
      it = shards.emplace(id, std::move(s)).first;
    } else {
      // Hand over what committed before this watch, so that the new
      // subscriber, added by the facade when this reply arrives, gets only
      // what commits after. A drain that resumed a failed one ends at that
      // one's older snapshot: a second drain reads up to now.
      const bool resumed = !it->second.upto.empty();
      drain(id, it->second);
      if (resumed)
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
  // Unread for longer than the retention (garbage collection may have taken
  // messages this node never read), or read across a server change: the
  // subscribers hear of the gap before the messages that follow it.
  if (s.lag_pending || env.steady_now() - s.drained > settings.retention) {
    bus_fetched lag;
    lag.lagged = subjects;
    self->send(facade, std::move(lag));
    s.lag_pending = false;
    s.drained = env.steady_now();
  }
  for (;;) {
    auto page = db::bus::fetch(*conn, id, s.since, s.upto, s.after, subjects, settings.fetch,
                               s.restarted_at);
    if (s.upto.empty())
      s.read_to_at = page.read_at;
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
    // The page is handed over and the resume point moved past it in one
    // step: a failure after this reads on from here, never this page again.
    if (!out.messages.empty())
      self->send(facade, std::move(out));
    if (!page.more) {
      s.since = std::move(page.snapshot);
      s.upto.clear();
      s.after.reset();
      break;
    }
    s.upto = page.snapshot;
    s.after = std::make_pair(page.rows.back().xid, page.rows.back().id);
  }
  s.restarted_at.clear();
  s.drained = env.steady_now();
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
