#include "actors/ingest/ingest_actor.hpp"

#include <algorithm>
#include <memory>

#include "actors/support/log.hpp"
#include "actors/trace/trace_recorder.hpp"
#include "messages/proto/push.hpp"

namespace waggle {

void ingest_state::init(ingest_ptr self_ptr, ingest_settings s,
                        std::vector<writer_session_actor> writers, hub_actor h, node_env e) {
  self = self_ptr;
  settings = s;
  gate = waggle::push_gate_cache{s.push_enabled, s.push_gate_cache};
  env = std::move(e);
  hub = std::move(h);
  all_writers = writers;
  idle_writers = std::move(writers);
  // A dead writer takes ingest down with it (and the supervisor restarts
  // both): in-flight outcomes are unknown, so nothing may be half-alive.
  for (auto& w : idle_writers)
    self->link_to(w);
}

void ingest_state::on_exit(const caf::exit_msg& msg) {
  if (msg.reason != caf::exit_reason::user_shutdown)
    log::error("ingest", "writer session died; failing in-flight events",
               {{"reason", caf::to_string(msg.reason)}});
  fail_everything("writer session failed");
  self->quit(msg.reason);
}

void ingest_state::fail_everything(const std::string& reason) {
  for (auto& [writer, batch] : in_flight)
    for (auto& p : batch.items)
      p.promise.deliver(ingest_reply{write_outcome::failed, reason});
  in_flight.clear();
  for (auto& p : queue)
    p.promise.deliver(ingest_reply{write_outcome::failed, reason});
  queue.clear();
}

void ingest_state::note_arrival(const std::string& author, time_point now) {
  recent[recent_next] = {author, now};
  recent_next = (recent_next + 1) % recent.size();
}

bool ingest_state::should_hold(time_point now) const {
  auto delay = settings.commit_delay;
  if (delay.count() == 0 || queue.empty() || queue.size() >= settings.max_batch)
    return false;
  if (now - queue.front().queued_at >= delay)
    return false;
  // Distinct authors of the recent arrivals (a few dozen: a linear scan).
  auto since = now - delay * 10;
  std::array<const std::string*, remembered> seen{};
  size_t distinct = 0;
  for (auto& a : recent) {
    if (a.author.empty() || a.at < since)
      continue;
    bool known = false;
    for (size_t i = 0; i < distinct && !known; ++i)
      known = *seen[i] == a.author;
    if (!known)
      seen[distinct++] = &a.author;
  }
  return distinct >= settings.commit_siblings;
}

caf::typed_response_promise<ingest_reply> ingest_state::on_request(ingest_request& req) {
  auto promise = self->make_response_promise<ingest_reply>();
  if (queue.size() >= settings.max_queue) {
    promise.deliver(ingest_reply{write_outcome::failed, "ingest queue full, retry later"});
    return promise;
  }
  auto now = env.steady_now();
  bool lease = false;
  if (req.ev) {
    note_arrival(req.ev->pubkey, now);
    lease = req.ev->kind == proto::push::kind_lease;
    if (lease)
      gate.on_lease_seen(req.community_id);  // from now on every batch gates it
  }
  pending item{ingest_item{req.community_id, std::move(req.ev)}, promise, now, lease, {}, {}};
  if (lease && settings.cluster_gate && gate.enabled()) {
    ask_cluster(std::move(item));
    return promise;
  }
  queue.push_back(std::move(item));
  dispatch();
  return promise;
}

// A clustered lease enters the queue only once every other live node gates
// its community (push_gate_relay.hpp); the queue does not wait meanwhile.
void ingest_state::ask_cluster(pending lease) {
  auto refuse = [](pending& p, std::string why) {
    p.promise.deliver(ingest_reply{write_outcome::failed, "push lease: " + why + "; retry"});
  };
  if (!gate_relay) {
    refuse(lease, "this node is not yet on the cluster's push gate");
    return;
  }
  auto held = std::make_shared<pending>(std::move(lease));
  self->request(gate_relay, std::chrono::seconds(10), cluster_gate_request{held->item.community_id})
    .then(
      [this, held, refuse](cluster_gate_done& done) mutable {
        if (!done.unconfirmed.empty()) {
          std::string names;
          for (const auto& n : done.unconfirmed)
            names += (names.empty() ? "" : ", ") + n;
          refuse(*held, "the push gate of node(s) " + names + " did not confirm");
          return;
        }
        held->remote_skipped = std::move(done.skipped);
        held->confirmed_at = env.steady_now();
        queue.push_back(std::move(*held));
        dispatch();
      },
      [held, refuse](caf::error& err) mutable {
        refuse(*held, "the cluster's push gate did not answer (" + caf::to_string(err) + ")");
      });
}

void ingest_state::on_tick() {
  hold_armed = false;
  dispatch();
}

void ingest_state::dispatch() {
  while (!queue.empty() && !idle_writers.empty()) {
    if (queue.front().lease) {
      // The barrier (push_gate_cache.hpp): every batch dispatched before
      // this lease was seen may have skipped its community's gate; the lease
      // waits until they have all finished, so it can name their events.
      if (!in_flight.empty())
        return;
      dispatch_lease();
      continue;
    }
    auto now = env.steady_now();
    if (should_hold(now)) {
      if (!hold_armed) {
        hold_armed = true;
        auto due = queue.front().queued_at + settings.commit_delay;
        self->delayed_send(self, due - now, ingest_tick{});
      }
      return;
    }
    auto writer = std::move(idle_writers.back());
    idle_writers.pop_back();
    auto n = std::min(queue.size(), settings.max_batch);
    auto& batch = in_flight[writer.address()];
    write_batch_request req;
    req.items.reserve(n);
    batch.items.reserve(n);
    std::vector<int64_t> communities;
    for (size_t k = 0; k < n && !queue.front().lease; ++k) {
      req.items.push_back(queue.front().item);
      communities.push_back(queue.front().item.community_id);
      batch.items.push_back(std::move(queue.front()));
      queue.pop_front();
    }
    batch.gate = gate.decide(communities);
    req.push_gate_all = batch.gate.all;
    req.push_gated = batch.gate.gated;
    auto done = [this, writer](write_batch_reply& reply) {
      on_batch_done(writer, std::move(reply));
    };
    // No timeout: a batch ends in a reply or in the writer's death (exit
    // handler, on_exit); a timeout could not tell us whether it committed.
    self->request(writer, caf::infinite, std::move(req))
      .then(traced_reply<write_batch_reply>(self, env, std::move(done)),
            [](caf::error&) { /* the exit handler answers the batch */ });
  }
}

void ingest_state::on_batch_done(writer_session_actor writer, write_batch_reply reply) {
  auto i = in_flight.find(writer.address());
  if (i == in_flight.end())
    return;
  auto flown = std::move(i->second);
  in_flight.erase(i);
  auto& batch = flown.items;
  committed_events committed;
  for (size_t k = 0; k < batch.size(); ++k) {
    auto result = k < reply.results.size()
                    ? reply.results[k]
                    : write_result{write_outcome::failed, "writer returned no result"};
    if (result.outcome == write_outcome::stored) {
      const auto& item = batch[k].item;
      // A push lease is write-only (its endpoint grant addresses a phone):
      // never fanned out, never read back (docs/push.md).
      if (!batch[k].lease)
        committed.items.push_back(item);
      if (item.ev && proto::push::is_push_kind(item.ev->kind))
        gate.note_stored(item.community_id, item.ev->id, flown.gate);
    }
    batch[k].promise.deliver(ingest_reply{result.outcome, std::move(result.reason)});
  }
  if (env.stats && !committed.items.empty()) {
    ++env.stats->ingest_batches;
    env.stats->ingest_batch_size.observe(static_cast<double>(batch.size()));
    env.stats->commit_latency.observe(reply.commit_seconds);
  }
  if (!committed.items.empty())
    self->send(hub, std::move(committed));
  settle_drains(writer.address());
  idle_writers.push_back(std::move(writer));
  dispatch();
}

// Another node's lease (push_gate_relay.hpp): gate the community from now
// on, and answer once the batches dispatched before have finished, naming
// the push events they stored ungated (kept: a lease of this node, or of a
// third, may need them too; they stop growing once every batch gates it).
caf::typed_response_promise<push_gate_drained>
ingest_state::on_gate_remote(const push_gate_remote& req) {
  auto promise = self->make_response_promise<push_gate_drained>();
  gate.on_lease_seen(req.community_id);
  gate_drain d{req.community_id, {}, promise};
  for (auto& [writer, batch] : in_flight)
    d.writers.insert(writer);
  if (d.writers.empty())
    promise.deliver(push_gate_drained{gate.skipped(req.community_id)});
  else
    drains.push_back(std::move(d));
  return promise;
}

void ingest_state::settle_drains(const caf::actor_addr& finished) {
  for (auto i = drains.begin(); i != drains.end();) {
    i->writers.erase(finished);
    if (!i->writers.empty()) {
      ++i;
      continue;
    }
    i->promise.deliver(push_gate_drained{gate.skipped(i->community_id)});
    i = drains.erase(i);
  }
}

// One lease, alone, in its own transaction (db::accept_lease_event).
void ingest_state::dispatch_lease() {
  auto writer = std::move(idle_writers.back());
  idle_writers.pop_back();
  auto& front = queue.front();
  if (settings.cluster_gate && front.confirmed_at != time_point{}
      && env.steady_now() - front.confirmed_at > settings.gate_confirmation_ttl) {
    // A starting node reads intents back only so far (migrations/0014).
    front.promise.deliver(ingest_reply{
      write_outcome::failed, "push lease: the cluster's confirmation is too old; retry"});
    queue.pop_front();
    idle_writers.push_back(std::move(writer));
    return;
  }
  auto& batch = in_flight[writer.address()];
  write_batch_request req;
  req.lease = true;
  req.items.push_back(front.item);
  req.push_skipped = gate.take_skipped(front.item.community_id);
  for (auto& id : front.remote_skipped)
    req.push_skipped.push_back(std::move(id));
  batch.items.push_back(std::move(queue.front()));
  queue.pop_front();
  auto done = [this, writer](write_batch_reply& reply) { on_batch_done(writer, std::move(reply)); };
  self->request(writer, caf::infinite, std::move(req))
    .then(traced_reply<write_batch_reply>(self, env, std::move(done)),
          [](caf::error&) { /* the exit handler answers the batch */ });
}

void ingest_state::on_gate_loaded(const push_gate_loaded& loaded) {
  // Clustered, the matcher's load is not ordered after this node's
  // registration; the relay's is (push_gate_relay.hpp).
  if (!settings.cluster_gate)
    gate.on_loaded(loaded.communities);
}

void ingest_state::on_cluster_gate_loaded(const cluster_gate_loaded& loaded) {
  if (settings.cluster_gate && loaded.ok)
    gate.on_loaded(loaded.communities);
}

// Start-up: every writer connection probes the roster fence; the first
// failure is the answer.
caf::typed_response_promise<fence_probe_reply> ingest_state::on_fence_probe() {
  auto promise = self->make_response_promise<fence_probe_reply>();
  auto left = std::make_shared<size_t>(all_writers.size());
  auto first_error = std::make_shared<status>();
  if (all_writers.empty())
    promise.deliver(fence_probe_reply{{ec::internal, "no writer sessions"}});
  for (auto& w : all_writers)
    self->request(w, caf::infinite, fence_probe_request{})
      .then(
        [promise, left, first_error](fence_probe_reply& reply) mutable {
          if (!reply.err.ok() && first_error->ok())
            *first_error = reply.err;
          if (--*left == 0)
            promise.deliver(fence_probe_reply{*first_error});
        },
        [promise, left, first_error](caf::error& err) mutable {
          if (first_error->ok())
            *first_error = {ec::unavailable, caf::to_string(err)};
          if (--*left == 0)
            promise.deliver(fence_probe_reply{*first_error});
        });
  return promise;
}

ingest_actor::behavior_type ingest_actor_impl(ingest_ptr self, ingest_settings settings,
                                              std::vector<writer_session_actor> writers,
                                              hub_actor hub, node_env env) {
  self->state.init(self, settings, std::move(writers), std::move(hub), std::move(env));
  self->set_exit_handler([self](const caf::exit_msg& msg) { self->state.on_exit(msg); });
  return {
    // -- requests ---------------------------------------------------------------
    // Recorded as taken, in ingest's own order of events and replies: batches
    // depend on it, so a replay hands ingest its requests in this order.
    [self](ingest_request& req) -> caf::typed_response_promise<ingest_reply> {
      trace_section section{self->state.env};  // its readings and batch follow it
      trace_ingest_in(self->state.env, self->current_sender(), req);
      return self->state.on_request(req);
    },
    [self](fence_probe_request) -> caf::typed_response_promise<fence_probe_reply> {
      return self->state.on_fence_probe();
    },
    [self](push_gate_loaded& loaded) {
      trace_section section{self->state.env};
      trace_node_message(self->state.env, "input", loaded);
      self->state.on_gate_loaded(loaded);
    },
    // A clustered node's gate (not recorded: docs/traces.md, "Limits").
    [self](push_gate_attach& attach) { self->state.gate_relay = std::move(attach.relay); },
    [self](cluster_gate_loaded& loaded) { self->state.on_cluster_gate_loaded(loaded); },
    [self](push_gate_remote& req) -> caf::typed_response_promise<push_gate_drained> {
      return self->state.on_gate_remote(req);
    },
    // -- timers -----------------------------------------------------------------
    [self](ingest_tick tick) {
      trace_section section{self->state.env};
      trace_node_message(self->state.env, "timer", tick);
      self->state.on_tick();
    },
  };
}

}  // namespace waggle
