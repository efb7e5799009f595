#pragma once

// What the write-policy plugin actor takes (docs/write-policy.md): events to
// judge, its child's output, and its own timers. Each struct's `inspect` is
// beside it; the type IDs are in messages/type_ids.hpp.

#include <cstdint>
#include <string>

#include <caf/meta/type_name.hpp>

#include "messages/proto/write_policy.hpp"
#include "messages/value_inspect.hpp"
#include "messages/values.hpp"

namespace waggle {

// Connection actor / HTTP submit -> write-policy plugin actor: judge this
// admitted event before it goes anywhere. `ip` is the client's address
// ("" if unknown); `received_at` the connection's clock reading (unix s).
struct policy_request {
  event_ptr ev;
  int64_t received_at = 0;
  std::string ip;
};
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, policy_request& x) {
  return f(caf::meta::type_name("policy_request"), x.ev, x.received_at, x.ip);
}

// The plugin's verdict, or the fail mode's when it could not give one (a
// closed fail mode rejects with "blocked: write policy unavailable").
struct policy_verdict {
  policy_action action = policy_action::reject;
  std::string msg;
};
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, policy_verdict& x) {
  return f(caf::meta::type_name("policy_verdict"), x.action, x.msg);
}

// The fail mode's verdict (`--write-policy-fail closed|open`).
inline policy_verdict unavailable_verdict(bool fail_open) {
  if (fail_open)
    return {policy_action::accept, ""};
  return {policy_action::reject, "blocked: write policy unavailable"};
}

// The plugin process's reader thread -> the plugin actor: one line of its
// stdout (an answer) or stderr (logged). `generation` names the child, so a
// line of a child that was already replaced is ignored.
struct policy_output {
  uint64_t generation = 0;
  bool is_stderr = false;
  std::string line;
};
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, policy_output& x) {
  return f(caf::meta::type_name("policy_output"), x.generation, x.is_stderr, x.line);
}

// Reader thread -> plugin actor: the child's stdout ended (it exited or
// closed it): it is killed, reaped and restarted.
struct policy_child_gone {
  uint64_t generation = 0;
};
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, policy_child_gone& x) {
  return f(caf::meta::type_name("policy_child_gone"), x.generation);
}

// Plugin actor -> itself: check deadlines and retry pending stdin writes.
struct policy_tick {};
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, policy_tick&) {
  return f(caf::meta::type_name("policy_tick"));
}

// Plugin actor -> itself, after the restart backoff: start a new child.
struct policy_restart {};
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, policy_restart&) {
  return f(caf::meta::type_name("policy_restart"));
}

}  // namespace waggle
