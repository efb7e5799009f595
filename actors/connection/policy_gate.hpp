#pragma once

// The write-policy verdict between admission and the batch, the same for the
// connection actor and the HTTP submit actor (docs/write-policy.md): an
// admitted event (stored, NIP-29 command or ephemeral) goes on only if the
// plugin accepts it. Without --write-policy the handle is null and `pass`
// runs at once: no message, no hop.

#include <chrono>
#include <utility>

#include "actors/support/env.hpp"
#include "actors/trace/trace_recorder.hpp"
#include "messages/interfaces.hpp"
#include "messages/outcome.hpp"

namespace waggle {

struct policy_gate_settings {
  caf::timespan timeout = std::chrono::milliseconds(2000);  // the plugin's per-event timeout
  bool fail_open = false;
};

// Calls exactly one of `pass()` (accepted: route the event as before) and
// `refuse(const answer&)` (a reject, or a shadowReject answered as accepted
// with nothing stored or delivered).
template <class Self, class Pass, class Refuse>
void policy_gate(Self* self, const node_env& env, const write_policy_actor& policy,
                 const policy_gate_settings& settings, policy_request req, Pass pass,
                 Refuse refuse) {
  if (!policy)
    return pass();
  auto apply = [pass, refuse](const policy_verdict& v) mutable {
    switch (v.action) {
      case policy_action::accept:
        return pass();
      case policy_action::shadow_reject:
        return refuse(answer_for(status{}));
      case policy_action::reject:
        return refuse(answer_for_policy_reject(v.msg));
    }
  };
  // The plugin actor answers by its own timeout; this one only covers the
  // actor itself being gone, and is then the fail mode's answer too.
  auto backstop = settings.timeout * 2 + std::chrono::seconds(1);
  self->request(policy, backstop, std::move(req))
    .then(traced_reply<policy_verdict>(self, env,
                                       [apply](policy_verdict& v) mutable { apply(v); }),
          [apply, open = settings.fail_open](caf::error&) mutable {
            apply(unavailable_verdict(open));
          });
}

}  // namespace waggle
