#pragma once

// The push matcher (docs/push.md, "The matcher"): detached, its own
// connection. Woken by the listen actor when committed jobs were NOTIFYed,
// and otherwise polling idly with backoff (poll_min doubling to poll_max),
// it runs db::run_match_batch: up to 64 due jobs of one community in ONE
// transaction, and hands the wakes it wrote (already claimed) to the push
// delivery supervisor. While work keeps arriving it runs a batch at most
// every `min_interval`, so a burst shares batches instead of paying a
// commit per message; a lone message is matched at once. At start it tells
// ingest which communities have a live lease (the gate cache); every 30 s
// it sweeps exhausted jobs, expired leases and old wakes.

#include <memory>
#include <string>

#include "actors/support/env.hpp"
#include "db/push_store.hpp"
#include "db/session.hpp"
#include "messages/interfaces.hpp"

namespace waggle {

struct push_matcher_settings {
  std::string database_url;
  db::match_settings match;
  std::string gateway_url;
  caf::timespan min_interval = std::chrono::milliseconds(50);
  caf::timespan poll_min = std::chrono::milliseconds(250);
  caf::timespan poll_max = std::chrono::seconds(2);
  caf::timespan sweep_interval = std::chrono::seconds(30);
};

struct push_matcher_state {
  static inline const char* name = "push_matcher";
  using ptr = push_matcher_actor::stateful_pointer<push_matcher_state>;

  ptr self = nullptr;
  push_matcher_settings settings;
  node_env env;
  ingest_actor ingest;
  delivery_supervisor_actor delivery;
  std::unique_ptr<db::session> session;
  bool gate_sent = false;  // ingest has the gate cache's start
  bool listener_up = false;
  caf::timespan poll_delay{};
  uint64_t tick_generation = 0;
  steady_time last_batch{};
  bool ran_once = false;
  std::vector<int64_t> recently_served;  // the last 8 batches' communities (fairness)

  void init(ptr self_ptr, push_matcher_settings s, ingest_actor i, delivery_supervisor_actor d,
            node_env e);
  void on_wake(const push_match_wake& w);
  void on_tick(const push_match_tick& t);
  void on_sweep();
  void on_health(const listener_health& h);

 private:
  void run();
  void arm(caf::timespan delay);
  void send_gate();
};

push_matcher_actor::behavior_type
push_matcher_actor_impl(push_matcher_state::ptr self, push_matcher_settings settings,
                        ingest_actor ingest, delivery_supervisor_actor delivery, node_env env);

}  // namespace waggle
