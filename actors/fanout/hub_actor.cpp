#include "actors/fanout/hub_actor.hpp"

#include <algorithm>
#include <charconv>
#include <optional>
#include <unordered_set>

#include "actors/fanout/revocations.hpp"
#include "actors/support/log.hpp"
#include "actors/trace/trace_numbered.hpp"
#include "messages/proto/nip29.hpp"
#include "messages/proto/nip40.hpp"

namespace waggle {

namespace {

// FNV-1a, 64 bits.
void mix(uint64_t& h, std::string_view bytes) {
  for (unsigned char c : bytes) {
    h ^= c;
    h *= 1099511628211ull;
  }
}

// A kind as its index key's value, without a heap string per event.
struct kind_text {
  char buf[24];
  std::size_t len;
  explicit kind_text(int64_t kind) {
    len = static_cast<std::size_t>(std::to_chars(buf, buf + sizeof buf, kind).ptr - buf);
  }
  std::string_view view() const { return {buf, len}; }
};

}  // namespace

uint64_t subscription_index::key_of(int64_t community_id, char dimension, std::string_view value,
                                    std::string_view value2) {
  uint64_t h = 14695981039346656037ull;
  mix(h, std::string_view{reinterpret_cast<const char*>(&community_id), sizeof community_id});
  mix(h, std::string_view{&dimension, 1});
  mix(h, value);
  if (!value2.empty()) {
    mix(h, "\x1f");
    mix(h, value2);
  }
  return h;
}

std::vector<uint64_t> subscription_index::keys_for(int64_t community_id,
                                                   const proto::filter& f) {
  // File each filter under ONE dimension, the most selective it has, so that
  // a candidate is found through exactly one path per matching value.
  std::vector<uint64_t> keys;
  if (f.ids && !f.ids->empty()) {
    for (auto& id : *f.ids)
      keys.push_back(key_of(community_id, 'i', id));
  } else if (!f.tags.empty()) {
    auto& [letter, values] = *f.tags.begin();
    for (auto& v : values)
      keys.push_back(key_of(community_id, 't', std::string_view{&letter, 1}, v));
  } else if (f.authors && !f.authors->empty()) {
    for (auto& a : *f.authors)
      keys.push_back(key_of(community_id, 'a', a));
  } else if (f.kinds && !f.kinds->empty()) {
    for (auto k : *f.kinds)
      keys.push_back(key_of(community_id, 'k', kind_text(k).view()));
  } else {
    keys.push_back(key_of(community_id, '*', ""));
  }
  std::sort(keys.begin(), keys.end());
  keys.erase(std::unique(keys.begin(), keys.end()), keys.end());
  return keys;
}

void subscription_index::add(const connection_actor& conn, int64_t community_id,
                             const std::string& sub_id, uint64_t generation,
                             std::vector<proto::filter> filters) {
  remove(conn.address(), sub_id);
  auto handle = next_handle_++;
  entry e{conn, community_id, sub_id, generation, std::move(filters), {}};
  for (auto& f : e.filters) {
    // NIP-50 search is one-shot (history, then EOSE): filed under no key,
    // such a filter is never a candidate, and costs no event a match.
    if (f.matches_nothing() || f.search)
      continue;
    auto keys = keys_for(community_id, f);
    e.keys.insert(e.keys.end(), keys.begin(), keys.end());
  }
  std::sort(e.keys.begin(), e.keys.end());
  e.keys.erase(std::unique(e.keys.begin(), e.keys.end()), e.keys.end());
  e.keys.shrink_to_fit();
  for (auto& key : e.keys)
    index_[key].push_back(handle);
  by_conn_[{conn.address(), sub_id}] = handle;
  subs_.emplace(handle, std::move(e));
}

void subscription_index::remove(const caf::actor_addr& conn, const std::string& sub_id) {
  auto i = by_conn_.find({conn, sub_id});
  if (i == by_conn_.end())
    return;
  auto handle = i->second;
  by_conn_.erase(i);
  auto s = subs_.find(handle);
  for (auto& key : s->second.keys) {
    auto& bucket = index_[key];
    bucket.erase(std::remove(bucket.begin(), bucket.end(), handle), bucket.end());
    if (bucket.empty())
      index_.erase(key);
  }
  subs_.erase(s);
}

void subscription_index::remove_connection(const caf::actor_addr& conn) {
  auto first = by_conn_.lower_bound({conn, std::string{}});
  std::vector<std::string> sub_ids;
  for (auto i = first; i != by_conn_.end() && i->first.first == conn; ++i)
    sub_ids.push_back(i->first.second);
  for (auto& id : sub_ids)
    remove(conn, id);
}

std::vector<subscription_index::match>
subscription_index::find(int64_t community_id, const proto::event& ev) const {
  // Scratch kept across calls (the hub calls this for every event of every
  // batch): cleared, never freed, so a busy hub allocates only the result.
  auto& candidates = scratch_candidates_;
  candidates.clear();
  auto collect = [&](uint64_t key) {
    if (auto i = index_.find(key); i != index_.end())
      candidates.insert(candidates.end(), i->second.begin(), i->second.end());
  };
  collect(key_of(community_id, 'i', ev.id));
  collect(key_of(community_id, 'a', ev.pubkey));
  collect(key_of(community_id, 'k', kind_text(ev.kind).view()));
  collect(key_of(community_id, '*', ""));
  for (auto& t : ev.tags)
    if (t.size() >= 2 && t[0].size() == 1)
      collect(key_of(community_id, 't', t[0], t[1]));
  std::sort(candidates.begin(), candidates.end());
  candidates.erase(std::unique(candidates.begin(), candidates.end()), candidates.end());
  auto channel = proto::nip29::channel_of(ev);
  const bool channel_scoped = !channel || channel->has_value();
  auto matches = [&](const std::vector<proto::filter>& filters) {
    for (const auto& f : filters)
      if ((!channel_scoped || f.tags.contains('h')) && proto::matches(f, ev))
        return true;
    return false;
  };
  // Matches grouped by connection through a sort, not a map: at a thousand
  // subscribers an event's look-up allocated a map node per connection.
  auto& hits = scratch_hits_;
  hits.clear();
  for (auto handle : candidates) {
    auto& e = subs_.at(handle);
    if (e.community_id == community_id && matches(e.filters))
      hits.emplace_back(e.conn.id(), handle);
  }
  std::sort(hits.begin(), hits.end());
  std::vector<match> out;
  out.reserve(hits.size());  // one a connection, nearly always
  for (size_t k = 0; k < hits.size(); ++k) {
    auto& e = subs_.at(hits[k].second);
    if (k == 0 || hits[k].first != hits[k - 1].first)
      out.push_back({e.conn, {}, {}});
    out.back().sub_ids.push_back(e.sub_id);
    out.back().generations.push_back(e.generation);
  }
  return out;
}

std::vector<connection_actor> subscription_index::connections_in(int64_t community_id) const {
  std::vector<connection_actor> out;
  std::unordered_set<caf::actor_addr> seen;
  for (const auto& [handle, e] : subs_)
    if (e.community_id == community_id && seen.insert(e.conn.address()).second)
      out.push_back(e.conn);
  return out;
}

void hub_state::init(hub_ptr self_ptr, node_env e) {
  self = self_ptr;
  env = std::move(e);
  // Named for traces: a connection's reply_in of an ephemeral event's ack
  // says it came from the hub.
  if (env.trace)
    env.trace->spawned(env.actor, caf::actor_cast<caf::actor>(self));
}

template <class Msg>
uint64_t hub_state::trace_to_relay(const Msg& msg) {
  if (!env.trace || !env.trace->node_level())
    return 0;
  auto n = ++relay_sent;
  trace_numbered(env, "cluster_out", n, msg);
  return n;
}

void hub_state::on_committed(const committed_events& batch) {
  auto fanned = fan_out(batch.items);
  if (relay && fanned > 0) {
    cluster_local_commit ring{static_cast<uint32_t>(fanned)};
    trace_to_relay(ring);
    self->send(relay, ring);
  }
}

void hub_state::on_cluster_committed(const cluster_committed& batch) {
  fan_out(batch.items, true);
}

size_t hub_state::fan_out(const std::vector<ingest_item>& items, bool from_database,
                          bool remember) {
  // NIP-40: an event that expired between admission and its commit is not
  // fanned out (reads stopped serving it at the same second). The clock is
  // read only for a batch that has an event with an expiration tag, at most
  // once per batch: nearly no batch does, and a trace gets no new readings.
  std::optional<int64_t> now;
  auto expired = [&](const proto::event& ev) {
    if (!proto::has_expiration_tag(ev))
      return false;
    auto at = proto::expiration_of(ev);
    if (!at)
      return true;  // admission refuses these; never fan one out
    if (!now)
      now = env.unix_now();
    return proto::has_expired(*at, *now);
  };
  size_t fanned = 0;
  for (auto& item : items) {
    // In a cluster an event comes twice (see recent_events.hpp); alone, once.
    if (clustered && remember && !recent.first(item.community_id, item.ev->id))
      continue;
    ++fanned;
    std::shared_ptr<const std::string> raw;
    if (!expired(*item.ev))
      for (auto& m : index.find(item.community_id, *item.ev)) {
        if (!raw)
          raw = std::make_shared<const std::string>(item.ev->raw);
        self->send(m.conn,
                   live_event{item.ev, std::move(m.sub_ids), std::move(m.generations), raw});
      }
    // Another node's command that ended someone's access: its actor told
    // only its own hub. Here it comes in commit order, so the connections
    // hear the revocation after the event itself and before anything that
    // committed later (docs/scaling.md).
    if (from_database)
      revoke_for(item);
  }
  return fanned;
}

void hub_state::revoke_for(const ingest_item& item) {
  auto r = revocations_of(item.community_id, *item.ev);
  for (auto& c : r.channels)
    on_revoked(c);
}

hub_ack hub_state::on_subscribe(hub_subscribe& req) {
  // Monitoring twice is harmless; it lets the hub forget a dead connection.
  self->monitor(req.conn);
  index.add(req.conn, req.community_id, req.sub_id, req.generation, std::move(req.filters));
  return {};
}

void hub_state::on_unsubscribe(const hub_unsubscribe& req) {
  index.remove(req.conn.address(), req.sub_id);
}

// Rare (a removal, a deletion, a channel made private): every connection
// of the community hears it and closes what rested on that access, in
// mailbox order with the live events, so none of the channel's later
// events reaches it first.
void hub_state::on_revoked(const channel_revoked& msg) {
  for (auto& conn : index.connections_in(msg.community_id))
    self->send(conn, msg);
}

void hub_state::on_revoked(const access_revoked& msg) {
  for (auto& conn : index.connections_in(msg.community_id))
    self->send(conn, msg);
}

// Ephemeral events are not remembered: each comes once (its origin's relay
// ignores its own), and remembering them would let a flood of them push
// committed events out of the window (any client can send them cheaply).
hub_ack hub_state::on_ephemeral(const ephemeral_publish& msg) {
  fan_out({msg.item}, false, false);
  if (relay) {
    cluster_local_ephemeral out{msg.item};
    trace_to_relay(out);
    self->send(relay, std::move(out));
  }
  return {};
}

void hub_state::on_cluster_ephemeral(const cluster_ephemeral& msg) {
  fan_out({msg.item}, false, false);
}

caf::typed_response_promise<cluster_barrier_done> hub_state::on_barrier() {
  auto promise = self->make_response_promise<cluster_barrier_done>();
  // Alone there is no other node to wait for. The relay's own bound (its
  // per-node requests) comes first; this one only keeps the hub from
  // holding a promise forever if the relay is gone.
  if (!relay) {
    cluster_barrier_done done;
    // In a cluster, a hub without its relay yet (just restarted, or the node
    // starting) cannot ask: fail closed.
    if (clustered)
      done.unconfirmed.push_back("(the cluster relay is not attached yet)");
    promise.deliver(std::move(done));
    return promise;
  }
  // The relay's answer is an input of the node (the other nodes' word):
  // recorded as this hub takes it, so a replay hands it over here.
  auto n = trace_to_relay(cluster_barrier{});
  self->request(relay, std::chrono::seconds(10), cluster_barrier{})
    .then(
      [this, promise, n](cluster_barrier_done& done) mutable {
        trace_section section{env, n > 0};
        if (n > 0)
          trace_numbered(env, "cluster_reply", n, done);
        promise.deliver(std::move(done));
      },
      [this, promise, n](caf::error& err) mutable {
        trace_section section{env, n > 0};
        if (n > 0)
          trace_numbered_error(env, "cluster_reply", n, err);
        cluster_barrier_done done;
        done.unconfirmed.push_back("(the cluster relay did not answer)");
        promise.deliver(std::move(done));
      });
  return promise;
}

// A roster publication goes to the channel's owner node through the relay
// (docs/scaling.md, "Roster publications"); alone, or without a relay yet,
// this node publishes (the database fence stays the authority). The
// relay's answer is the other nodes' word: recorded like a barrier's.
caf::typed_response_promise<roster_routed> hub_state::on_roster_route(const roster_route& msg) {
  auto promise = self->make_response_promise<roster_routed>();
  if (!relay) {
    promise.deliver(roster_routed{});
    return promise;
  }
  auto n = trace_to_relay(msg);
  self->request(relay, std::chrono::seconds(10), msg)
    .then(
      [this, promise, n](roster_routed& routed) mutable {
        trace_section section{env, n > 0};
        if (n > 0)
          trace_numbered(env, "cluster_reply", n, routed);
        promise.deliver(routed);
      },
      [this, promise, n](caf::error& err) mutable {
        trace_section section{env, n > 0};
        if (n > 0)
          trace_numbered_error(env, "cluster_reply", n, err);
        promise.deliver(roster_routed{});
      });
  return promise;
}

void hub_state::on_attach(const cluster_attach& msg) {
  if (relay == msg.relay)
    return;
  relay = msg.relay;
  log::info("hub", "cluster relay attached", {});
}

void hub_state::on_down(const caf::down_msg& msg) { index.remove_connection(msg.source); }

namespace {

// What reaches the hub from actors no replay runs (docs/traces.md, "The
// cluster"): the cluster tail's pages and revocations, the relay's ephemeral
// events, syncs and attach, and access_revoked (sent only by actors outside
// a replay: the tail, the membership and community watchers, the HTTP API).
// Recorded as an input in a section, so what the hub sends for it follows.
template <class Msg>
void trace_taken(const node_env& env, const Msg& msg) {
  trace_node_message(env, "input", msg);
}

// channel_revoked comes from the group actor too, which a replay runs: only
// the tail's (a command another node ran) is an input.
bool from_tail(hub_ptr self) {
  auto& env = self->state.env;
  if (!env.trace || !env.trace->node_level() || !self->current_sender())
    return false;
  return env.trace->name_of(self->current_sender()->address()) == "cluster_tail";
}

hub_actor::behavior_type hub_behavior(hub_ptr self, node_env env, bool clustered) {
  self->state.init(self, std::move(env));
  self->state.clustered = clustered;
  self->set_down_handler([self](const caf::down_msg& msg) { self->state.on_down(msg); });
  auto& e = self->state.env;
  return {
    // -- committed events -------------------------------------------------------
    [self](committed_events& batch) { self->state.on_committed(batch); },
    [self](ephemeral_publish& msg) { return self->state.on_ephemeral(msg); },
    // -- the cluster (docs/scaling.md) ------------------------------------------
    [self, &e](cluster_committed& batch) {
      trace_section section{e};
      trace_taken(e, batch);
      self->state.on_cluster_committed(batch);
    },
    [self, &e](cluster_ephemeral& msg) {
      trace_section section{e};
      trace_taken(e, msg);
      self->state.on_cluster_ephemeral(msg);
    },
    [self, &e](cluster_attach& msg) {
      trace_section section{e};
      trace_taken(e, msg);
      self->state.on_attach(msg);
    },
    [self](cluster_barrier&) { return self->state.on_barrier(); },
    [self](roster_route& msg) { return self->state.on_roster_route(msg); },
    // Mailbox order: everything sent here before it has been handled.
    [&e](cluster_sync& msg) {
      trace_section section{e};
      trace_taken(e, msg);
      return cluster_synced{};
    },
    // -- subscriptions ----------------------------------------------------------
    [self](hub_subscribe& req) { return self->state.on_subscribe(req); },
    [self](hub_unsubscribe& req) { self->state.on_unsubscribe(req); },
    // -- revocations ------------------------------------------------------------
    [self, &e](channel_revoked& msg) {
      auto tail = from_tail(self);
      trace_section section{e, tail};
      if (tail)
        trace_taken(e, msg);
      self->state.on_revoked(msg);
    },
    [self, &e](access_revoked& msg) {
      trace_section section{e};
      trace_taken(e, msg);
      self->state.on_revoked(msg);
    },
  };
}

}  // namespace

hub_actor::behavior_type hub_actor_impl(hub_ptr self, node_env env) {
  return hub_behavior(self, std::move(env), false);
}

hub_actor::behavior_type clustered_hub_actor_impl(hub_ptr self, node_env env) {
  return hub_behavior(self, std::move(env), true);
}

}  // namespace waggle
