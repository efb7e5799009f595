#include "actors/bus/bus_probe.hpp"

#include <algorithm>

#include "actors/support/log.hpp"
#include "actors/trace/trace_numbered.hpp"
#include "messages/proto/bus_payloads.hpp"
#include "messages/proto/nip11.hpp"

namespace waggle {

std::string bus_ping_subject(const std::string& node_id) {
  return "waggle.node." + node_id + ".ping";
}

std::string bus_probe_subject(const std::string& node_id) {
  return "waggle.node." + node_id + ".probe";
}

template <class Reply, class Msg, class Done, class Failed>
void bus_probe_state::ask(Msg msg, Done done, Failed failed) {
  auto n = ++requests;
  trace_numbered(env, "bus_out", n, msg);
  self->request(bus, settings.answer_bound, std::move(msg))
    .then(
      [this, n, done](Reply& reply) mutable {
        trace_section section{env};
        trace_numbered(env, "bus_reply", n, reply);
        done(reply);
      },
      [this, n, failed](caf::error& err) mutable {
        trace_section section{env};
        trace_numbered_error(env, "bus_reply", n, err);
        failed(err);
      });
}

void bus_probe_state::init(ptr self_ptr, bus_actor bus_handle, bus_probe_settings s,
                           node_env e) {
  self = self_ptr;
  bus = std::move(bus_handle);
  settings = std::move(s);
  env = std::move(e);
  // Its first subscribes, together: nothing recorded between them.
  trace_section section{env};
  start();
}

void bus_probe_state::start() {
  subscriptions.resize(3);
  subscriptions[ping_slot] = {bus_ping_subject(settings.node_id), "", 0, false};
  subscriptions[cluster_ping_slot] = {bus_cluster_ping_subject, bus_cluster_ping_group, 0, false};
  subscriptions[probe_slot] = {bus_probe_subject(settings.node_id), "", 0, false};
  subscribe_missing();
  self->delayed_send(self, settings.interval, bus_probe_tick{1});
}

// Each subscription until the bus took it: a bus that was unavailable at
// the start (PostgreSQL down) is asked again at every tick.
void bus_probe_state::subscribe_missing() {
  for (size_t i = 0; i < subscriptions.size(); ++i) {
    auto& s = subscriptions[i];
    if (s.id != 0 || s.pending)
      continue;
    s.pending = true;
    ask<bus_subscription>(
      bus_subscribe{s.subject, s.group, caf::actor_cast<bus_subscriber_actor>(self)},
      [this, i](bus_subscription& sub) {
        subscriptions[i].pending = false;
        subscriptions[i].id = sub.id;
      },
      [this, i](caf::error& err) {
        subscriptions[i].pending = false;
        log::warn("bus", "the node's bus subscription was refused",
                  {{"subject", subscriptions[i].subject}, {"error", caf::to_string(err)}});
      });
  }
}

void bus_probe_state::on_message(const bus_message& msg) {
  if (msg.subject == subscriptions[probe_slot].subject)
    probe_back(msg);
  else
    answer_ping(msg);
}

void bus_probe_state::answer_ping(const bus_message& msg) {
  if (msg.reply_to.empty())
    return;  // a ping published, not requested: nobody to answer
  if (env.stats)
    ++env.stats->bus.pings_answered;
  ask<bus_ack>(
    bus_publish{msg.reply_to, proto::ping_answer_payload(settings.node_id, proto::software_version), {}}, [](bus_ack&) {},
    [this](caf::error& err) {
      if (env.stats)
        env.stats->bus.count_refused(err);
    });
}

void bus_probe_state::probe_back(const bus_message& msg) {
  auto n = proto::parse_probe_number(msg.payload);
  if (!n)
    return;  // someone else's message on our subject
  auto i = in_flight.find(*n);
  if (i == in_flight.end())
    return;  // already counted lost
  auto rtt = std::chrono::duration_cast<std::chrono::microseconds>(env.steady_now() - i->second);
  in_flight.erase(i);
  if (env.stats) {
    ++env.stats->bus.probes_returned;
    env.stats->bus.probe_rtt_us = rtt.count();
    env.stats->bus.probe_rtt_us_sum += static_cast<uint64_t>(std::max<int64_t>(rtt.count(), 0));
  }
}

void bus_probe_state::on_tick(uint64_t n) {
  subscribe_missing();
  // Only once the bus delivers the probe subject to us: a probe published
  // before would be lost for the subscription's sake, not the bus's.
  if (subscriptions[probe_slot].id != 0) {
    in_flight[n] = env.steady_now();
    if (env.stats)
      ++env.stats->bus.probes_sent;
    ask<bus_ack>(
      bus_publish{subscriptions[probe_slot].subject, proto::probe_payload(settings.node_id, n), {}},
      [](bus_ack&) {},
      [this, n](caf::error& err) {
        // Not published: neither lost nor returned.
        in_flight.erase(n);
        if (env.stats)
          env.stats->bus.count_refused(err);
      });
    self->delayed_send(self, std::min(settings.deadline, settings.interval),
                       bus_probe_deadline{n});
  }
  self->delayed_send(self, settings.interval, bus_probe_tick{n + 1});
}

void bus_probe_state::on_deadline(uint64_t n) {
  if (in_flight.erase(n) == 0)
    return;
  if (env.stats)
    ++env.stats->bus.probes_lost;
  log::warn("bus", "a bus probe was not back by its deadline",
            {{"node_id", settings.node_id}, {"probe", std::to_string(n)}});
}

bus_probe_actor::behavior_type bus_probe_impl(bus_probe_state::ptr self, bus_actor bus,
                                              bus_probe_settings settings, node_env env) {
  self->state.init(self, std::move(bus), std::move(settings), std::move(env));
  return {
    [self](bus_message& msg) {
      trace_section section{self->state.env};
      trace_node_message(self->state.env, "input", msg);
      self->state.on_message(msg);
    },
    [self](bus_lagged& lag) {
      // At most once: a lost ping is the asker's timeout, a lost probe its
      // deadline. Recorded all the same (it reached the actor).
      trace_section section{self->state.env};
      trace_node_message(self->state.env, "input", lag);
      log::info("bus", "the node's bus subscription lagged",
                {{"subject", lag.subject}, {"missed", std::to_string(lag.missed)}});
    },
    // -- timers -----------------------------------------------------------------
    [self](bus_probe_tick t) {
      trace_section section{self->state.env};
      trace_node_message(self->state.env, "timer", t);
      self->state.on_tick(t.n);
    },
    [self](bus_probe_deadline d) {
      trace_section section{self->state.env};
      trace_node_message(self->state.env, "timer", d);
      self->state.on_deadline(d.n);
    },
  };
}

}  // namespace waggle
