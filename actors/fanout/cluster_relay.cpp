#include "actors/fanout/cluster_relay.hpp"

#include "actors/support/log.hpp"
#include "actors/trace/trace_recorder.hpp"
#include "messages/proto/bus_payloads.hpp"
#include "messages/proto/event.hpp"

namespace waggle {

std::string cluster_barrier_subject(const std::string& node_id) {
  return "waggle.node." + node_id + ".barrier";
}

std::string cluster_roster_subject(const std::string& node_id) {
  return "waggle.node." + node_id + ".roster";
}

namespace {

// FNV-1a, 64 bits: the same on every node and build (std::hash is not
// promised to be).
uint64_t fnv1a(std::string_view bytes, uint64_t h = 14695981039346656037ull) {
  for (unsigned char c : bytes) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

}  // namespace

std::string roster_owner(const std::vector<std::string>& nodes, int64_t community_id,
                         const std::string& channel) {
  auto key = fnv1a("\n" + std::to_string(community_id) + "\n" + channel);
  std::string best;
  uint64_t best_score = 0;
  for (const auto& node : nodes) {
    // Mixed once more so that nodes whose ids share a prefix spread evenly.
    auto score = fnv1a(node, key) * 0x9E3779B97F4A7C15ull;
    score ^= score >> 29;
    if (best.empty() || score > best_score || (score == best_score && node < best)) {
      best = node;
      best_score = score;
    }
  }
  return best;
}

void cluster_relay_state::init(ptr self_ptr, bus_actor b, cluster_tail_actor t,
                               std::function<hub_actor()> hub,
                               std::function<group_actor()> group, cluster_relay_settings s,
                               node_env e) {
  self = self_ptr;
  bus = std::move(b);
  tail = std::move(t);
  current_hub = std::move(hub);
  current_group = std::move(group);
  settings = std::move(s);
  env = std::move(e);
  // No replay runs the relay (docs/traces.md, "The cluster"): what it hands
  // the hub is recorded where the hub takes it, what the hub sends it where
  // the hub sends it. Its own clock readings (the doorbell's coalescing)
  // decide only rings, which reach no replayed actor.
  if (env.trace) {
    env.trace->spawned(env.actor, caf::actor_cast<caf::actor>(self));
    env.trace = nullptr;
  }
  if (settings.doorbell)
    subjects.emplace_back(cluster_commits_subject, false);
  subjects.emplace_back(cluster_ephemeral_subject, false);
  subjects.emplace_back(cluster_roster_subject(settings.node_id), false);
  // Last: on_message tells a barrier by it.
  subjects.emplace_back(cluster_barrier_subject(settings.node_id), false);
  attach();
  subscribe_missing();
  read_nodes();
  self->delayed_send(self, settings.tick, cluster_relay_tick{});
}

void cluster_relay_state::read_nodes() {
  if (nodes_reading)
    return;
  nodes_reading = true;
  nodes_read_at = env.steady_now();
  self->request(tail, settings.answer_bound, cluster_nodes_request{})
    .then(
      [this](cluster_nodes& nodes) {
        nodes_reading = false;
        if (!nodes.ok)
          return;  // the last list stands until a read succeeds
        live_nodes = std::move(nodes.ids);
        live_nodes.push_back(settings.node_id);
        nodes_known = true;
      },
      [this](caf::error&) { nodes_reading = false; });
}

void cluster_relay_state::attach() {
  auto hub = current_hub ? current_hub() : hub_actor{};
  if (!hub || hub == attached)
    return;
  self->send(hub, cluster_attach{self});
  attached = hub;
}

void cluster_relay_state::subscribe_missing() {
  if (subscribing)
    return;
  for (size_t i = 0; i < subjects.size(); ++i) {
    if (subjects[i].second)
      continue;
    // One at a time: the next waits for this one's answer (or the tick).
    subscribing = true;
    self->request(bus, settings.answer_bound, bus_subscribe{subjects[i].first, "", self})
      .then(
        [this, i](bus_subscription&) {
          subjects[i].second = true;
          subscribing = false;
          subscribe_missing();
        },
        [this, i](caf::error& err) {
          subscribing = false;
          log::warn("cluster", "subscribe failed; retrying",
                    {{"subject", subjects[i].first}, {"error", caf::to_string(err)}});
        });
    return;
  }
}

void cluster_relay_state::on_message(const bus_message& msg) {
  if (msg.subject == cluster_commits_subject) {
    // Its own rings come back too (it subscribes to the subject it rings).
    if (msg.payload != settings.node_id)
      self->send(tail, cluster_ring{});
    return;
  }
  if (msg.subject == subjects.back().first) {
    answer_barrier(msg);
    return;
  }
  if (msg.subject == cluster_roster_subject(settings.node_id)) {
    answer_roster(msg);
    return;
  }
  if (msg.subject != cluster_ephemeral_subject)
    return;
  auto parts = proto::parse_ephemeral_payload(msg.payload);
  if (!parts) {
    log::warn("cluster", "dropped an ephemeral event of another shape", {});
    return;
  }
  if (parts->origin == settings.node_id)
    return;
  auto ev = proto::parse_event(parts->raw);
  // Only ephemeral kinds travel this way: anything else on this subject is
  // not another node's (stored events come from the database).
  if (!ev || ev->kind < 20000 || ev->kind >= 30000 || !proto::verify_signature(*ev)) {
    log::warn("cluster", "dropped an ephemeral event that does not verify",
              {{"origin", parts->origin}});
    return;
  }
  auto hub = current_hub ? current_hub() : hub_actor{};
  if (hub)
    self->send(hub, cluster_ephemeral{ingest_item{
                      parts->community_id, std::make_shared<const proto::event>(std::move(*ev))}});
}

void cluster_relay_state::on_lagged(const bus_lagged&) {
  // Doorbells were lost: the tail reads anyway (what it reads is the
  // database's, so nothing else was).
  self->send(tail, cluster_ring{});
}

void cluster_relay_state::on_local_commit() {
  auto now = env.steady_now();
  if (now - last_ring >= settings.coalesce) {
    ring();
    return;
  }
  ring_pending = true;
  if (!trailing_scheduled) {
    trailing_scheduled = true;
    self->delayed_send(self, settings.coalesce - (now - last_ring), cluster_relay_tick{true});
  }
}

void cluster_relay_state::ring() {
  last_ring = env.steady_now();
  ring_pending = false;
  publish(cluster_commits_subject, settings.node_id);
}

void cluster_relay_state::on_local_ephemeral(const cluster_local_ephemeral& msg) {
  publish(cluster_ephemeral_subject,
          proto::ephemeral_payload(settings.node_id, msg.item.community_id, msg.item.ev->raw));
}

caf::typed_response_promise<cluster_barrier_done> cluster_relay_state::on_barrier() {
  auto promise = self->make_response_promise<cluster_barrier_done>();
  auto fail = [promise](std::string why) mutable {
    cluster_barrier_done done;
    done.unconfirmed.push_back(std::move(why));
    promise.deliver(std::move(done));
  };
  self->request(tail, settings.answer_bound, cluster_nodes_request{})
    .then(
      [this, promise, fail](cluster_nodes& nodes) mutable {
        if (!nodes.ok)
          return fail("(the node registry could not be read)");
        if (nodes.ids.empty())
          { promise.deliver(cluster_barrier_done{}); return; }
        struct tally {
          size_t left;
          cluster_barrier_done done;
        };
        auto t = std::make_shared<tally>(tally{nodes.ids.size(), {}});
        for (auto& id : nodes.ids) {
          auto settle = [t, promise, id](bool confirmed) mutable {
            if (confirmed)
              ++t->done.confirmed;
            else
              t->done.unconfirmed.push_back(id);
            if (--t->left == 0)
              promise.deliver(t->done);
          };
          self
            ->request(bus, settings.answer_bound,
                      bus_request{cluster_barrier_subject(id), settings.node_id,
                                  settings.barrier_timeout_ms})
            .then([settle](bus_message&) mutable { settle(true); },
                  [settle](caf::error&) mutable {
                    // Fail closed, no_responders included: a node still
                    // starting (its relay not yet subscribed, or its CAF
                    // links not yet made) may already hold subscriptions.
                    settle(false);
                  });
        }
      },
      [fail](caf::error& err) mutable { fail("(the cluster tail: " + caf::to_string(err) + ")"); });
  return promise;
}

void cluster_relay_state::answer_barrier(const bus_message& msg) {
  if (msg.reply_to.empty())
    return;
  auto reply_to = msg.reply_to;
  // The origin committed before it asked, so a read from now on sees its
  // commit; the hub answers the sync after the read's batches (mailbox
  // order), so the revocations they carry have reached the connections.
  self->request(tail, settings.answer_bound, cluster_read_now{})
    .then(
      [this, reply_to](cluster_read_done& done) {
        auto hub = current_hub ? current_hub() : hub_actor{};
        if (!done.ok || !hub)
          return;  // unanswered: the origin reports this node unconfirmed
        self->request(hub, settings.answer_bound, cluster_sync{})
          .then([this, reply_to](cluster_synced&) { publish(reply_to, settings.node_id); },
                [](caf::error&) {});
      },
      [](caf::error&) {});
}

caf::typed_response_promise<roster_routed>
cluster_relay_state::on_roster_route(const roster_route& msg) {
  auto promise = self->make_response_promise<roster_routed>();
  auto owner = nodes_known ? roster_owner(live_nodes, msg.community_id, msg.channel) : "";
  if (owner.empty() || owner == settings.node_id) {
    promise.deliver(roster_routed{});
    return promise;
  }
  self
    ->request(bus, settings.answer_bound,
              bus_request{cluster_roster_subject(owner),
                          proto::roster_payload(msg.community_id, msg.channel),
                          settings.roster_timeout_ms})
    .then([promise](bus_message&) mutable { promise.deliver(roster_routed{true}); },
          [this, promise, owner](caf::error& err) mutable {
            // The owner is gone or slow: publish here; the registry is read
            // again at once, so the next change finds the new owner.
            log::info("cluster", "roster owner did not answer; publishing here",
                      {{"owner", owner}, {"error", caf::to_string(err)}});
            read_nodes();
            promise.deliver(roster_routed{});
          });
  return promise;
}

void cluster_relay_state::answer_roster(const bus_message& msg) {
  auto req = proto::parse_roster_payload(msg.payload);
  auto group = current_group ? current_group() : group_actor{};
  // Unanswered (the asker publishes itself) when it is not of that shape or
  // there is no group actor to hand it to.
  if (!req || !group || msg.reply_to.empty()) {
    if (!req)
      log::warn("cluster", "dropped a roster request of another shape", {});
    return;
  }
  // Idempotent: a channel already dirty here publishes once more at most,
  // and the publication captures the roster afresh under the fence.
  self->send(group, roster_requested{req->community_id, std::move(req->channel)});
  publish(msg.reply_to, settings.node_id);
}

void cluster_relay_state::publish(const std::string& subject, std::string payload) {
  self->request(bus, settings.answer_bound, bus_publish{subject, std::move(payload), ""})
    .then([](bus_ack&) {},
          [subject](caf::error& err) {
            // A lost ring costs the tail's poll interval, never an event.
            log::warn("cluster", "publish failed",
                      {{"subject", subject}, {"error", caf::to_string(err)}});
          });
}

void cluster_relay_state::on_trailing() {
  // The trailing edge: a commit inside the window is always rung for.
  trailing_scheduled = false;
  if (!ring_pending)
    return;
  auto since = env.steady_now() - last_ring;
  if (since >= settings.coalesce) {
    ring();
  } else {
    trailing_scheduled = true;
    self->delayed_send(self, settings.coalesce - since, cluster_relay_tick{true});
  }
}

void cluster_relay_state::on_tick() {
  attach();
  subscribe_missing();
  if (env.steady_now() - nodes_read_at >= settings.nodes_refresh)
    read_nodes();
  self->delayed_send(self, settings.tick, cluster_relay_tick{});
}

cluster_relay_actor::behavior_type cluster_relay_impl(cluster_relay_state::ptr self, bus_actor bus,
                                                      cluster_tail_actor tail,
                                                      std::function<hub_actor()> current_hub,
                                                      std::function<group_actor()> current_group,
                                                      cluster_relay_settings settings,
                                                      node_env env) {
  self->state.init(self, std::move(bus), std::move(tail), std::move(current_hub),
                   std::move(current_group), std::move(settings), std::move(env));
  return {
    [self](bus_message& msg) { self->state.on_message(msg); },
    [self](bus_lagged& msg) { self->state.on_lagged(msg); },
    [self](cluster_local_commit&) { self->state.on_local_commit(); },
    [self](cluster_local_ephemeral& msg) { self->state.on_local_ephemeral(msg); },
    [self](cluster_barrier&) { return self->state.on_barrier(); },
    [self](roster_route& msg) { return self->state.on_roster_route(msg); },
    [self](cluster_relay_tick& tick) {
      if (tick.trailing)
        self->state.on_trailing();
      else
        self->state.on_tick();
    },
  };
}

}  // namespace waggle
