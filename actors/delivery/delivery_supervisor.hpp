#pragma once

// The delivery supervisor (docs/delivery.md): the node's one bounded
// delivery mechanism. It owns a fixed number of delivery slots and keeps at
// most that many requests in flight; whenever a slot frees it claims again
// at once (no waiting for a batch: a slow receiver holds only its own slot).
// It claims when woken (the listen actor, on a committed notification), when
// a slot frees, and on an idle poll that backs off from `poll_min` to
// `poll_max` while notifications arrive and stays at `poll_min` while the
// listener is down. Scheduled retries are claimed when due. Its queue is
// the delivery store's business; the supervisor only decides what an answer
// means (classify_delivery, delivery_backoff) and counts it.

#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "actors/support/env.hpp"
#include "gateway/http_client.hpp"
#include "messages/interfaces.hpp"

namespace waggle {

struct delivery_settings {
  std::string queue = "operator_listener";  // the metric label
  uint32_t slots = 10;
  // Requests one receiver (route) may have out at once (0: no cap): a
  // receiver that never answers holds this many slots, never all of them.
  uint32_t per_route = 4;
  caf::timespan poll_min = std::chrono::milliseconds(250);
  caf::timespan poll_max = std::chrono::seconds(2);
  // Well above the store session's statement_timeout (node_supervisor.cpp):
  // a claim that commits must reach the supervisor, or its rows wait out
  // their lease and pay an attempt for nothing.
  caf::timespan store_timeout = std::chrono::seconds(30);
  std::chrono::milliseconds request_timeout{5000};
  int32_t max_backoff_exponent = 7;
  std::string relay_secret;  // for the slots' NIP-98
  // Jobs claimed elsewhere (delivery_ready) wait here for a slot: at most
  // `ready_max` of them, each at most `ready_max_wait` (its revalidation is
  // that old); one dropped is claimed again when its claim's lease runs out.
  size_t ready_max = 1024;
  caf::timespan ready_max_wait = std::chrono::seconds(1);
  // 0: each completion is written at once. Otherwise completions are held
  // up to this long (or until `completion_batch` wait) and written in one
  // transaction: a held completion lost in a crash only means a resend with
  // the same request id when the claim's lease runs out.
  caf::timespan completion_delay{};
  size_t completion_batch = 64;
  // false: a freed slot takes ready jobs but does not claim (a queue whose
  // first attempts arrive as delivery_ready claims only retries, on its
  // poll, which then backs off whatever the listener's health).
  bool claim_when_freed = true;
};

struct delivery_supervisor_state;
using delivery_supervisor_ptr = delivery_supervisor_actor::stateful_pointer<delivery_supervisor_state>;

struct delivery_supervisor_state {
  static inline const char* name = "delivery_supervisor";

  delivery_supervisor_ptr self = nullptr;
  delivery_store_actor store;
  delivery_settings settings;
  node_env env;
  std::vector<delivery_slot_actor> slots;
  std::vector<uint32_t> free_slots;
  std::vector<std::string> slot_routes;  // each busy slot's job's route; empty when free
  struct ready_job {
    delivery_job job;
    steady_time since;
  };
  std::deque<ready_job> ready;
  std::vector<delivery_complete_request> completions;  // held (completion_delay)
  std::vector<std::string> completion_outcomes;        // each one's metric label
  bool flush_armed = false;
  bool claiming = false;     // one claim at a time
  bool claim_again = false;  // woken while claiming
  bool listener_up = false;  // until the listen actor says so, the poll does not back off
  caf::timespan poll_delay{};
  uint64_t tick_generation = 0;

  void init(delivery_supervisor_ptr self_ptr, delivery_store_actor s,
            std::shared_ptr<gateway::http_client> http, delivery_settings cfg, node_env e);
  void claim();
  void on_claimed(delivery_claim_reply& reply);
  void on_done(delivery_done& d);
  void on_wake(const delivery_wake& w);
  void on_health(const listener_health& h);
  void on_tick(const delivery_tick& t);
  void on_ready(delivery_ready& r);
  void on_flush();

  size_t in_flight() const { return slots.size() - free_slots.size(); }

 private:
  void arm_poll(caf::timespan delay);
  void count(std::string_view outcome);
  void send_ready();
  void complete(delivery_complete_request req, std::string outcome);
};

delivery_supervisor_actor::behavior_type
delivery_supervisor_actor_impl(delivery_supervisor_ptr self, delivery_store_actor store,
                               std::shared_ptr<gateway::http_client> http,
                               delivery_settings settings, node_env env);

}  // namespace waggle
