#pragma once

// The write-policy plugin actor: owns one strfry-style plugin process
// (`--write-policy PATH`, docs/write-policy.md), sends it every admitted
// event, and answers each policy_request with the plugin's verdict, matched by
// event id. When the plugin is down, restarting, over its queue or too slow,
// the fail mode answers instead (closed: reject "blocked: write policy
// unavailable"; open: accept).
//
// Spawned detached: restarting a dead or hung plugin reaps it (waitpid after
// SIGKILL) and a shutdown gives it a grace period to exit; those waits stall
// only this actor's own mailbox, never a scheduler thread. Its stdin is
// written without blocking, so a plugin that stops reading cannot stall it.

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>

#include "actors/policy/plugin_process.hpp"
#include "actors/support/env.hpp"
#include "messages/interfaces.hpp"

namespace waggle {

struct write_policy_settings {
  std::string path;                                    // the plugin executable
  size_t max_queue = 1000;                             // events awaiting a verdict
  caf::timespan timeout = std::chrono::milliseconds(2000);  // per event
  bool fail_open = false;
  std::chrono::milliseconds shutdown_grace{1000};      // SIGTERM, then SIGKILL
};

struct write_policy_state;
using write_policy_ptr = write_policy_actor::stateful_pointer<write_policy_state>;

struct write_policy_state {
  static inline const char* name = "write_policy";

  struct waiter {
    std::string id;
    steady_time deadline;
    caf::typed_response_promise<policy_verdict> promise;
  };

  write_policy_ptr self = nullptr;
  write_policy_settings settings;
  node_env env;
  std::unique_ptr<plugin_process> proc;
  uint64_t generation = 0;  // of the current child; output of older ones is ignored
  bool up = false;
  uint64_t starts = 0;  // children started, for the log
  int failures = 0;  // since the plugin last gave a verdict: the restart backoff
  uint64_t next_seq = 0;
  // By arrival, which is also by deadline (one timeout for all).
  std::map<uint64_t, waiter> waiting;
  std::unordered_multimap<std::string, uint64_t> by_id;
  bool tick_pending = false;
  steady_time tick_at{};

  ~write_policy_state();
  void init(write_policy_ptr self_ptr, write_policy_settings s, node_env e);
  caf::result<policy_verdict> on_request(const policy_request& req);
  void on_output(const policy_output& out);
  void on_gone(const policy_child_gone& msg);
  void on_tick();
  void on_restart();
  void shutdown();

  // What the fail mode answers when the plugin cannot.
  policy_verdict fail_verdict() const;

 private:
  void start_child();
  void child_failed(const std::string& why);
  void answer_all(const policy_verdict& v);
  void schedule_tick();
};

write_policy_actor::behavior_type
write_policy_actor_impl(write_policy_ptr self, write_policy_settings settings, node_env env);

}  // namespace waggle
