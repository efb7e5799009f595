#include "actors/delivery/delivery_supervisor.hpp"

#include <algorithm>

#include "actors/delivery/delivery_slot.hpp"
#include "actors/support/log.hpp"
#include "actors/trace/trace_recorder.hpp"

namespace waggle {

namespace {
constexpr int64_t min_retry_wait_ms = 50;
}  // namespace

void delivery_supervisor_state::init(delivery_supervisor_ptr self_ptr, delivery_store_actor s,
                                     std::shared_ptr<gateway::http_client> http,
                                     delivery_settings cfg, node_env e) {
  self = self_ptr;
  store = std::move(s);
  settings = std::move(cfg);
  env = std::move(e);
  poll_delay = settings.poll_min;
  listener_up = !settings.claim_when_freed;  // see claim_when_freed
  // Linked: a slot that dies takes the supervisor (and its siblings) with it,
  // and the node supervisor restarts the lot; rows claimed then are claimed
  // again when their lease runs out (at least once, never lost).
  for (uint32_t i = 0; i < std::max<uint32_t>(1, settings.slots); ++i) {
    delivery_slot_settings ss{i, settings.relay_secret, settings.request_timeout};
    auto name = settings.queue + "-slot-" + std::to_string(i);
    slots.push_back(self->spawn<caf::linked>(
      delivery_slot_actor_impl, delivery_supervisor_actor{self}, http, std::move(ss),
      env.for_actor(name)));
    if (env.trace)
      env.trace->spawned(name, caf::actor_cast<caf::actor>(slots.back()));
  }
  slot_routes.resize(slots.size());
  // Highest index on top: slot 0 is taken first (stable traces).
  for (uint32_t i = static_cast<uint32_t>(slots.size()); i-- > 0;)
    free_slots.push_back(i);
  // Whatever was committed while no supervisor ran.
  claim();
}

void delivery_supervisor_state::claim() {
  send_ready();  // jobs already claimed go first
  if (free_slots.empty()) {
    // A slot that frees claims again; where freed slots do not claim (push),
    // only the poll does, so it must stay armed or retries wait forever.
    if (!settings.claim_when_freed)
      arm_poll(poll_delay);
    return;
  }
  if (claiming) {
    claim_again = true;
    return;
  }
  claiming = true;
  claim_again = false;
  delivery_claim_request req{static_cast<uint32_t>(free_slots.size()), settings.per_route, {}};
  for (const auto& route : slot_routes)  // a free slot's route is empty
    if (!route.empty())
      req.busy_routes.push_back(route);
  self->request(store, settings.store_timeout, std::move(req))
    .then([this](delivery_claim_reply& reply) {
            trace_section section{env};  // its reply_in, then what it sends
            on_claimed(reply);
          },
          [this](caf::error& err) {
            log::warn("delivery", "claim got no answer",
                      {{"queue", settings.queue}, {"error", caf::to_string(err)}});
            delivery_claim_reply failed;
            failed.failed = true;
            on_claimed(failed);
          });
}

void delivery_supervisor_state::on_claimed(delivery_claim_reply& reply) {
  trace_reply_in(env, self->current_sender(), reply);
  claiming = false;
  int64_t oldest_ms = 0;
  const int64_t now_ms = env.unix_now() * 1000;
  size_t waiting = 0;  // claimed rows put in line, in claim order
  for (auto& job : reply.jobs) {
    oldest_ms = std::max(oldest_ms, now_ms - job.created_at * 1000);
    if (free_slots.empty()) {
      // The claim asked for the slots free when it left, but wakes handed
      // over meanwhile (push: delivery_ready) may have taken them. The row is
      // claimed: it waits in memory for the next free slot, first in line
      // (revalidated by this claim), not for its lease to run out.
      if (ready.size() >= settings.ready_max) {
        count("overflow");  // claimed again when its claim's lease runs out
        continue;
      }
      // (The clock is read only here: a replayed trace reads it where the
      // recording did.)
      ready.insert(ready.begin() + static_cast<std::ptrdiff_t>(waiting++),
                   {std::move(job), env.steady_now()});
      continue;
    }
    auto slot = free_slots.back();
    free_slots.pop_back();
    slot_routes[slot] = job.route;
    self->send(slots[slot], delivery_attempt{std::move(job)});
  }
  if (env.stats) {
    env.stats->deliveries_in_flight = static_cast<int64_t>(in_flight());
    env.stats->delivery_queue_age_ms = oldest_ms;
  }
  if (reply.failed) {
    arm_poll(settings.poll_max);  // the database is away: not a tight loop
    return;
  }
  if (!reply.jobs.empty())
    poll_delay = settings.poll_min;
  else if (listener_up)
    poll_delay = std::min(settings.poll_max, poll_delay * 2);
  else
    poll_delay = settings.poll_min;
  auto next = poll_delay;
  // A due row the claim did not take is one another claimer holds (SKIP
  // LOCKED) for the milliseconds its claim takes: the floor keeps that from
  // becoming a loop of claims.
  if (reply.next_due_ms >= 0)
    next = std::min(next, caf::timespan{std::chrono::milliseconds(
                            std::max<int64_t>(reply.next_due_ms, min_retry_wait_ms))});
  arm_poll(next);
  if (claim_again)
    claim();
}

void delivery_supervisor_state::on_done(delivery_done& d) {
  free_slots.push_back(d.slot);
  slot_routes[d.slot].clear();
  if (env.stats)
    env.stats->deliveries_in_flight = static_cast<int64_t>(in_flight());
  auto verdict = classify_delivery(d.response);
  delivery_complete_request req{d.job, verdict, 0};
  if (verdict == delivery_verdict::retry)
    req.retry_after_ms = delivery_backoff(d.job.attempts, settings.max_backoff_exponent).count();
  if (verdict != delivery_verdict::delivered)
    log::info("delivery", verdict == delivery_verdict::retry ? "will retry" : "refused for good",
              {{"queue", settings.queue},
               {"route", d.job.route},
               {"delivery_id", d.job.delivery_id},
               {"attempt", std::to_string(d.job.attempts)},
               {"status", std::to_string(d.response.status)},
               {"error", d.response.error}});
  const char* outcome = verdict == delivery_verdict::delivered ? "delivered"
                        : verdict == delivery_verdict::retry   ? "retry"
                        : verdict == delivery_verdict::gone    ? "gone"
                                                               : "failed";
  // The completion goes to the store before the claim below, in one mailbox:
  // the claim sees this row completed (a held one is still claimed by this
  // supervisor, so no claim can take it either).
  complete(std::move(req), outcome);
  if (settings.claim_when_freed)
    claim();
  else
    send_ready();
}

void delivery_supervisor_state::complete(delivery_complete_request req, std::string outcome) {
  auto counted = [this](delivery_completion result, const std::string& outcome) {
    switch (result) {
      case delivery_completion::done: count(outcome); break;
      case delivery_completion::dropped: count("dropped"); break;
      case delivery_completion::fenced: count("fenced"); break;
      case delivery_completion::failed: count("unrecorded"); break;
    }
  };
  if (settings.completion_delay == caf::timespan{}) {
    self->request(store, settings.store_timeout, std::move(req))
      .then(
        [this, outcome, counted](delivery_complete_reply& r) {
          trace_reply_in(env, self->current_sender(), r);
          counted(r.result, outcome);
        },
        [this](caf::error&) { count("unrecorded"); });
    return;
  }
  completions.push_back(std::move(req));
  completion_outcomes.push_back(std::move(outcome));
  if (completions.size() >= settings.completion_batch)
    on_flush();
  else if (!flush_armed) {
    flush_armed = true;
    self->delayed_send(self, settings.completion_delay, delivery_flush{});
  }
}

void delivery_supervisor_state::on_flush() {
  flush_armed = false;
  if (completions.empty())
    return;
  delivery_complete_batch batch{std::move(completions)};
  auto outcomes = std::move(completion_outcomes);
  completions.clear();
  completion_outcomes.clear();
  self->request(store, settings.store_timeout, std::move(batch))
    .then(
      [this, outcomes](delivery_complete_batch_reply& r) {
        trace_reply_in(env, self->current_sender(), r);
        for (size_t i = 0; i < outcomes.size(); ++i) {
          auto result = i < r.results.size() ? r.results[i].result : delivery_completion::failed;
          switch (result) {
            case delivery_completion::done: count(outcomes[i]); break;
            case delivery_completion::dropped: count("dropped"); break;
            case delivery_completion::fenced: count("fenced"); break;
            case delivery_completion::failed: count("unrecorded"); break;
          }
        }
      },
      [this, n = outcomes.size()](caf::error&) {
        for (size_t i = 0; i < n; ++i)
          count("unrecorded");
      });
}

void delivery_supervisor_state::on_ready(delivery_ready& r) {
  auto now = env.steady_now();
  for (auto& job : r.jobs) {
    if (ready.size() >= settings.ready_max) {
      count("overflow");  // claimed again when its claim's lease runs out
      continue;
    }
    ready.push_back({std::move(job), now});
  }
  send_ready();
}

void delivery_supervisor_state::send_ready() {
  auto now = env.steady_now();
  while (!ready.empty() && !free_slots.empty()) {
    auto r = std::move(ready.front());
    ready.pop_front();
    if (now - r.since > settings.ready_max_wait) {
      count("stale");  // its revalidation is too old: the claim's lease runs out, claimed anew
      continue;
    }
    auto slot = free_slots.back();
    free_slots.pop_back();
    slot_routes[slot] = r.job.route;
    self->send(slots[slot], delivery_attempt{std::move(r.job)});
  }
  if (env.stats)
    env.stats->deliveries_in_flight = static_cast<int64_t>(in_flight());
}

void delivery_supervisor_state::on_wake(const delivery_wake&) {
  claim();
}

void delivery_supervisor_state::on_health(const listener_health& h) {
  listener_up = h.up;
  if (env.stats)
    env.stats->listener_up = h.up ? 1 : 0;
  if (!h.up) {
    // Notifications may be lost from now on: poll at the floor.
    poll_delay = settings.poll_min;
    arm_poll(poll_delay);
  }
}

void delivery_supervisor_state::on_tick(const delivery_tick& t) {
  if (t.generation != tick_generation)
    return;  // re-armed since
  claim();
}

void delivery_supervisor_state::arm_poll(caf::timespan delay) {
  self->delayed_send(self, delay, delivery_tick{++tick_generation});
}

void delivery_supervisor_state::count(std::string_view outcome) {
  if (env.stats)
    env.stats->count_delivery(settings.queue, outcome);
}

delivery_supervisor_actor::behavior_type
delivery_supervisor_actor_impl(delivery_supervisor_ptr self, delivery_store_actor store,
                               std::shared_ptr<gateway::http_client> http,
                               delivery_settings settings, node_env env) {
  self->state.init(self, std::move(store), std::move(http), std::move(settings), std::move(env));
  return {
    [self](delivery_wake w) {
      trace_section section{self->state.env};
      trace_node_message(self->state.env, "input", w);
      self->state.on_wake(w);
    },
    [self](listener_health h) {
      trace_section section{self->state.env};
      trace_node_message(self->state.env, "input", h);
      self->state.on_health(h);
    },
    [self](delivery_done& d) { self->state.on_done(d); },
    [self](delivery_ready& r) {
      trace_section section{self->state.env};
      trace_node_message(self->state.env, "input", r);
      self->state.on_ready(r);
    },
    [self](delivery_flush f) {
      trace_section section{self->state.env};
      trace_node_message(self->state.env, "timer", f);
      self->state.on_flush();
    },
    // -- timers -----------------------------------------------------------------
    [self](delivery_tick t) {
      trace_section section{self->state.env};
      trace_node_message(self->state.env, "timer", t);
      self->state.on_tick(t);
    },
  };
}

}  // namespace waggle
