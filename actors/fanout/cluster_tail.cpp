#include "actors/fanout/cluster_tail.hpp"

#include <stdexcept>

#include <caf/scoped_actor.hpp>

#include "actors/fanout/revocations.hpp"
#include "actors/support/log.hpp"
#include "actors/trace/trace_recorder.hpp"
#include "actors/support/metrics.hpp"
#include "db/bus_store.hpp"
#include "messages/proto/event.hpp"

namespace waggle {

void cluster_tail_state::init(ptr self_ptr, cluster_tail_settings s,
                              std::function<hub_actor()> hub, node_env e) {
  self = self_ptr;
  settings = std::move(s);
  current_hub = std::move(hub);
  env = std::move(e);
  // A trace holds what the tail sends the hub, where the hub takes it
  // (docs/traces.md, "The cluster"): it names the tail as its sender. The
  // tail itself is a database connection no replay runs: its clock readings
  // (the registry's heartbeat) would only fill the file.
  if (env.trace) {
    env.trace->spawned(env.actor, caf::actor_cast<caf::actor>(self));
    env.trace = nullptr;
  }
  connect();
  self->delayed_send(self, settings.poll, cluster_tail_tick{true});
}

bool cluster_tail_state::connect() {
  if (conn)
    return true;
  try {
    conn = db::bus::open(settings.database_url, "cluster-tail", std::chrono::seconds(10));
    auto started = db::bus::server_started(*conn);
    if (since.empty()) {
      // Where this node starts: what commits from now on. Events committed
      // before reach its subscribers as history, by REQ.
      since = db::bus::current_snapshot(*conn, &read_at);
    } else if (started != server) {
      // A restart, a crash recovery or a promoted standby: ids below
      // `since` may come again (fetch_committed says how that read works).
      log::warn("cluster", "the database server changed; reading by time once",
                {{"since", read_at}});
      received_since = read_at;
    }
    server = started;
    announced = {};
    announce_if_due();
    return conn != nullptr;
  } catch (const std::exception& e) {
    conn.reset();
    log::warn("cluster", "tail cannot reach the database; retrying", {{"error", e.what()}});
    return false;
  }
}

void cluster_tail_state::on_ring() {
  if (read_queued)
    return;
  read_queued = true;
  self->send(self, cluster_tail_tick{false});
}

void cluster_tail_state::on_tick(bool periodic) {
  if (periodic)
    self->delayed_send(self, settings.poll, cluster_tail_tick{true});
  else
    read_queued = false;
  if (!connect())
    return;
  if (periodic)
    announce_if_due();
  read();
}

void cluster_tail_state::announce_if_due() {
  auto now = env.steady_now();
  if (announced != steady_time{} && now - announced < settings.heartbeat)
    return;
  try {
    db::cluster::announce(*conn, settings.node_id, settings.protocol_version);
    announced = now;
    if (env.stats)
      env.stats->bus.cluster_nodes =
        static_cast<int64_t>(
          db::cluster::live_node_ids(*conn, settings.node_id, settings.node_ttl).size())
        + 1;
  } catch (const std::exception& e) {
    conn.reset();
    log::warn("cluster", "the registry could not be updated", {{"error", e.what()}});
  }
}

namespace {

// xid8 text is a decimal number.
bool xid_before(const std::string& a, const std::string& b) {
  return a.size() != b.size() ? a.size() < b.size() : a < b;
}

}  // namespace

bool cluster_tail_state::read() {
  try {
    auto hub = current_hub ? current_hub() : hub_actor{};
    std::string upto;
    std::optional<std::tuple<std::string, int64_t, std::string>> after;
    db::cluster::committed_page page;
    std::vector<db::cluster::access_change> changes;
    size_t next_change = 0;
    cluster_committed batch;
    size_t unconfirmed = 0;
    auto flush = [&] {
      if (!batch.items.empty() && hub) {
        unconfirmed += batch.items.size();
        self->send(hub, std::move(batch));
      }
      batch = {};
      // A node catching up reads pages faster than its hub fans them out:
      // every few pages it waits for the hub to have taken what was sent
      // (mailbox order), so the hub's mailbox holds at most that much.
      if (unconfirmed >= settings.hub_window && hub) {
        unconfirmed = 0;
        caf::scoped_actor waiter{self->system()};
        bool taken = false;
        waiter->request(hub, std::chrono::seconds(30), cluster_sync{})
          .receive([&](cluster_synced&) { taken = true; }, [&](caf::error&) {});
        if (!taken)
          throw std::runtime_error("the hub did not take the tail's pages within 30 s");
      }
    };
    // Who lost access, as the hub's connections must hear it: after the
    // events of the same and earlier transactions, before later ones.
    auto revoke_before = [&](const std::string* xid) {
      while (next_change < changes.size() && (!xid || xid_before(changes[next_change].xid, *xid))) {
        flush();
        auto& c = changes[next_change++];
        if (hub)
          self->send(hub, access_revoked{c.community_id, c.pubkey});
      }
    };
    do {
      page = db::cluster::fetch_committed(*conn, since, upto, after, settings.bounds,
                                          received_since);
      if (upto.empty()) {
        upto = page.snapshot;
        changes = db::cluster::fetch_access_changes(*conn, since, upto, received_since);
      }
      batch.items.reserve(page.rows.size());
      for (auto& row : page.rows) {
        after.emplace(row.xid, row.community_id, row.id);
        revoke_before(&row.xid);
        // The row was validated when it was written; one that does not parse
        // now (it cannot, short of a hand-edited table) is skipped, loudly.
        auto ev = proto::parse_event(row.raw);
        if (!ev) {
          log::error("cluster", "an event row does not parse; not fanned out",
                     {{"community_id", std::to_string(row.community_id)}});
          continue;
        }
        if (row.gone) {
          // A command that ended access, deleted since: nothing to deliver,
          // but its revocation holds, in its place in the order.
          flush();
          for (auto& r : revocations_of(row.community_id, *ev).channels)
            if (hub)
              self->send(hub, std::move(r));
          continue;
        }
        batch.items.push_back(
          ingest_item{row.community_id, std::make_shared<const proto::event>(std::move(*ev))});
      }
      flush();
    } while (page.more);
    revoke_before(nullptr);
    // Every row up to `upto` has gone to the hub: the next read starts there.
    since = upto;
    read_at = page.read_at;
    received_since.clear();
    return true;
  } catch (const std::exception& e) {
    // Nothing moved: the next read covers the same window again, paging from
    // its start (rows sent before the break come again; the hub drops them,
    // and a revocation sent twice only closes what is already closed).
    conn.reset();
    log::warn("cluster", "tail read failed; reconnecting", {{"error", e.what()}});
    return false;
  }
}

cluster_read_done cluster_tail_state::on_read_now() {
  // A tail that has no snapshot yet would take one now, which already holds
  // the command the barrier is about: it would read nothing and confirm.
  bool had_snapshot = !since.empty();
  if (!connect() || !had_snapshot)
    return cluster_read_done{false};
  return cluster_read_done{read()};
}

cluster_nodes cluster_tail_state::on_nodes() {
  cluster_nodes out;
  if (!connect())
    return out;
  try {
    out.ids = db::cluster::live_node_ids(*conn, settings.node_id, settings.node_ttl);
    out.ok = true;
  } catch (const std::exception& e) {
    conn.reset();
    log::warn("cluster", "reading the node registry failed", {{"error", e.what()}});
  }
  return out;
}

cluster_tail_actor::behavior_type cluster_tail_impl(cluster_tail_state::ptr self,
                                                    cluster_tail_settings settings,
                                                    std::function<hub_actor()> current_hub,
                                                    node_env env) {
  self->state.init(self, std::move(settings), std::move(current_hub), std::move(env));
  return {
    [self](cluster_ring&) { self->state.on_ring(); },
    [self](cluster_tail_tick& tick) { self->state.on_tick(tick.periodic); },
    [self](cluster_read_now&) { return self->state.on_read_now(); },
    [self](cluster_nodes_request&) { return self->state.on_nodes(); },
  };
}

}  // namespace waggle
