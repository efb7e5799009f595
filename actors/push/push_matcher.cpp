#include "actors/push/push_matcher.hpp"

#include <pqxx/except>

#include "actors/delivery/push_source.hpp"
#include "actors/support/log.hpp"
#include "actors/trace/trace_recorder.hpp"

namespace waggle {

namespace {

// The pure match's input and output, as the trace records it.
push_match_record record_of(const db::match_batch& b) {
  push_match_record r;
  r.community_id = b.community_id;
  for (const auto& e : b.events) {
    r.event_ids.push_back(e.id);
    r.event_authors.push_back(e.author);
    r.event_channels.push_back(e.channel.value_or(""));
    r.event_kinds.push_back(e.kind);
  }
  auto join = [](const auto& v) {
    std::string out;
    for (const auto& x : v) {
      if (!out.empty())
        out += ',';
      if constexpr (std::is_same_v<std::decay_t<decltype(x)>, std::string>)
        out += x;
      else
        out += std::to_string(x);
    }
    return out;
  };
  for (const auto& l : b.leases) {
    r.lease_authors.push_back(l.author);
    r.lease_installations.push_back(l.installation_id);
    r.lease_channels.push_back(join(l.channels));
    r.lease_kinds.push_back(join(l.kinds));
    r.lease_mutes.push_back(join(l.mutes));
  }
  for (const auto& p : b.readable) {
    r.readable_events.push_back(p.event);
    r.readable_authors.push_back(p.author);
  }
  for (const auto& w : b.decided) {
    r.wake_events.push_back(w.event);
    r.wake_leases.push_back(w.lease);
  }
  return r;
}

}  // namespace

void push_matcher_state::init(ptr self_ptr, push_matcher_settings s, ingest_actor i,
                              delivery_supervisor_actor d, node_env e) {
  self = self_ptr;
  settings = std::move(s);
  ingest = std::move(i);
  delivery = std::move(d);
  env = std::move(e);
  poll_delay = settings.poll_min;
  session = std::make_unique<db::session>(settings.database_url, "push-matcher",
                                          std::vector<std::string>{"SET statement_timeout = 5000"},
                                          log::session_report);
  send_gate();
  self->delayed_send(self, settings.sweep_interval, push_sweep_tick{});
  // Whatever was committed while no matcher ran.
  run();
}

void push_matcher_state::send_gate() {
  if (gate_sent)
    return;
  auto* conn = session->get();
  if (!conn)
    return;  // the next batch tries again; ingest gates everything meanwhile
  try {
    self->send(ingest, push_gate_loaded{db::live_lease_communities(*conn)});
    gate_sent = true;
  } catch (const pqxx::broken_connection&) {
    session->reset();
  } catch (const std::exception& e) {
    log::warn("push_matcher", "gate load failed", {{"error", e.what()}});
  }
}

void push_matcher_state::on_wake(const push_match_wake&) {
  // At most one batch per min_interval while jobs keep arriving: the wake
  // waits for the rest of the interval (their jobs share one batch).
  auto next = last_batch + settings.min_interval;
  auto now = env.steady_now();
  if (!ran_once || now >= next)
    run();
  else
    arm(next - now);
}

void push_matcher_state::on_tick(const push_match_tick& t) {
  if (t.generation != tick_generation)
    return;
  run();
}

void push_matcher_state::on_health(const listener_health& h) {
  listener_up = h.up;
  if (!h.up) {
    poll_delay = settings.poll_min;
    arm(poll_delay);
  }
}

void push_matcher_state::run() {
  send_gate();
  ran_once = true;
  last_batch = env.steady_now();
  auto* conn = session->get();
  if (!conn) {
    arm(settings.poll_max);
    return;
  }
  db::match_batch b;
  try {
    b = db::run_match_batch(*conn, settings.match, env.unix_now(), recently_served);
  } catch (const pqxx::broken_connection&) {
    session->reset();
    arm(settings.poll_max);
    return;
  } catch (const std::exception& e) {
    log::error("push_matcher", "batch failed", {{"error", e.what()}});
    if (env.stats)
      env.stats->count_push_jobs("context_error", 1);
    arm(settings.poll_max);
    return;
  }
  if (b.jobs > 0) {
    recently_served.push_back(b.community_id);
    if (recently_served.size() > 8)
      recently_served.erase(recently_served.begin());
    if (env.trace)
      trace_node_message(env, "match", record_of(b));
    if (env.stats) {
      env.stats->count_push_jobs("matched", b.matched);
      env.stats->count_push_jobs("unmatched", b.unmatched);
      env.stats->count_push_jobs("gone", b.gone);
      env.stats->count_push_jobs("error", b.retried);
      for (const auto& [outcome, n] : b.wakes)
        env.stats->count_push_wakes(db::to_string(outcome), n);
      env.stats->push_match_queue_age_ms = static_cast<int64_t>(b.oldest_job_seconds * 1000);
    }
    if (!b.ready.empty()) {
      delivery_ready ready;
      for (const auto& w : b.ready)
        ready.jobs.push_back(push_job(w, b.community_id, b.community_host, settings.gateway_url));
      self->send(delivery, std::move(ready));
    }
  }
  if (b.jobs >= settings.match.max_jobs) {
    // A full batch: more are due. The next one after the interval.
    poll_delay = settings.poll_min;
    arm(settings.min_interval);
    return;
  }
  if (b.jobs > 0) {
    // Jobs may have been queued behind this batch without a NOTIFY (the
    // gate rings only into an empty queue): look again after the interval.
    poll_delay = settings.poll_min;
    arm(settings.min_interval);
    return;
  }
  if (!listener_up)
    poll_delay = settings.poll_min;
  else
    poll_delay = std::min(settings.poll_max, poll_delay * 2);
  arm(poll_delay);
}

void push_matcher_state::arm(caf::timespan delay) {
  self->delayed_send(self, delay, push_match_tick{++tick_generation});
}

void push_matcher_state::on_sweep() {
  self->delayed_send(self, settings.sweep_interval, push_sweep_tick{});
  auto* conn = session->get();
  if (!conn)
    return;
  try {
    auto reaped = db::reap_exhausted_matches(*conn, settings.match);
    db::sweep_push(*conn);
    if (reaped > 0 && env.stats)
      env.stats->count_push_jobs("exhausted", reaped);
  } catch (const pqxx::broken_connection&) {
    session->reset();
  } catch (const std::exception& e) {
    log::warn("push_matcher", "sweep failed", {{"error", e.what()}});
  }
}

push_matcher_actor::behavior_type
push_matcher_actor_impl(push_matcher_state::ptr self, push_matcher_settings settings,
                        ingest_actor ingest, delivery_supervisor_actor delivery, node_env env) {
  self->state.init(self, std::move(settings), std::move(ingest), std::move(delivery),
                   std::move(env));
  return {
    // Inputs are recorded, but the batch runs outside a trace section: it
    // holds a database transaction, and a section would hold every other
    // actor's records back for as long (the matcher is checked by its match
    // records, not replayed step by step).
    [self](push_match_wake w) {
      trace_node_message(self->state.env, "input", w);
      self->state.on_wake(w);
    },
    [self](listener_health h) {
      trace_node_message(self->state.env, "input", h);
      self->state.on_health(h);
    },
    [self](push_match_tick t) {
      trace_node_message(self->state.env, "timer", t);
      self->state.on_tick(t);
    },
    [self](push_sweep_tick) { self->state.on_sweep(); },
  };
}

}  // namespace waggle
