#pragma once

// The one table from an outcome to how it is answered. Every answer to a
// submitted event, over WebSocket (OK) and POST /events (JSON body and HTTP
// status) alike, and the metric it counts under, comes from here, so the two
// transports cannot drift apart. An outcome is either a status decided before
// the database (admission: invalid, restricted, auth-required, ...) or a
// write_outcome the database decided.
//
//   code           accepted  OK prefix        HTTP  metric
//   none           yes       (empty)          200   accepted
//   duplicate      yes       duplicate:       200   duplicate
//   invalid        no        invalid:         400   invalid
//   blocked        no        blocked:         403   blocked
//   restricted     no        restricted:      403   restricted
//   auth_required  no        auth-required:   401   auth-required
//   rate_limited   no        rate-limited:    429   rate-limited
//   unavailable    no        error:           503   error
//   internal       no        error:           503   error
//
// write_outcome -> code: stored -> none, duplicate and superseded ->
// duplicate, rejected -> invalid, refused -> restricted, blocked -> blocked, rate_limited ->
// rate_limited, failed -> unavailable.

#include <cstdint>
#include <string>
#include <string_view>

#include "messages/proto/status.hpp"
#include "messages/values.hpp"

namespace waggle {

struct answer {
  bool accepted = false;
  std::string message;       // OK's message: "" or "prefix: reason"
  std::string_view metric;   // "accepted", "duplicate", or the rejection's prefix
  uint16_t http_status = 200;
};

// A decision made before the database; an ok status is an acceptance.
answer answer_for(const status& st);

// What the database did with the event.
answer answer_for(write_outcome outcome, const std::string& reason);

// A write-policy plugin's reject (docs/write-policy.md): its message as is when
// it starts with one of NIP-01's machine prefixes, else under "blocked: "
// ("blocked: rejected by write policy" when empty). Counted and given an HTTP
// status by its prefix; prefixes with no code of ours (pow, mute) as blocked.
answer answer_for_policy_reject(std::string_view msg);

// The code a write outcome is answered under (the table above).
ec code_of(write_outcome outcome);

}  // namespace waggle
