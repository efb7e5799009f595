#pragma once

// What the community actors take: NIP-43 join, leave and invite requests (the
// membership actor), the community watcher's pokes and timer, and NIP-86
// management calls (docs/communities.md, docs/management.md). The revocation
// the watcher sends through the hub is in messages/fanout.hpp. Each struct's
// `inspect` is beside it; the type IDs are in messages/type_ids.hpp.

#include <cstdint>
#include <string>
#include <vector>

#include <caf/meta/type_name.hpp>

#include "messages/proto/status.hpp"
#include "messages/value_inspect.hpp"
#include "messages/values.hpp"

namespace waggle {

// -- membership (NIP-43) ------------------------------------------------------------

// Connection actor / HTTP submit -> membership actor: a join (28934) or
// leave (28936) request. Answered after COMMIT with the OK to send.
struct membership_request {
  int64_t community_id = 0;
  event_ptr ev;
};
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, membership_request& x) {
  return f(caf::meta::type_name("membership_request"), x.community_id, x.ev);
}

struct membership_reply {
  bool accepted = false;
  std::string message;  // OK's message, e.g. "claim-accepted: welcome"
};
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, membership_reply& x) {
  return f(caf::meta::type_name("membership_reply"), x.accepted, x.message);
}

// Connection actor -> membership actor: a REQ asked for kind 28935.
struct invite_request {
  int64_t community_id = 0;
  std::vector<std::string> pubkeys;  // proven on the connection
};
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, invite_request& x) {
  return f(caf::meta::type_name("invite_request"), x.community_id, x.pubkeys);
}

struct invite_reply {
  event_ptr invite;  // relay-signed 28935 with a fresh claim code; never stored
  status err;
};
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, invite_reply& x) {
  return f(caf::meta::type_name("invite_reply"), x.invite, x.err);
}

// -- community watcher --------------------------------------------------------------

// -> community watcher: changes were committed, look now (else: its timer).
struct access_poke {};
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, access_poke&) {
  return f(caf::meta::type_name("access_poke"));
}

struct watch_tick {};
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, watch_tick&) {
  return f(caf::meta::type_name("watch_tick"));
}

// -- NIP-86 management (docs/management.md) -----------------------------------------

// Node's per-request actor -> management actor: a JSON-RPC call whose NIP-98
// signature checked; `caller` is the key it proved.
struct manage_request {
  int64_t community_id = 0;
  std::string caller;
  std::string body;
  // When the caller stops waiting, on this process's steady clock
  // (nanoseconds since its epoch; caller and management actor share the
  // process): the call must be over by then, committed or rolled back, so
  // that an answer of 504 is true. 0: no deadline.
  int64_t deadline_steady_ns = 0;
  // The NIP-98 token that authorized the call (its signature, hex) and when
  // it stops passing (unix seconds): recorded in the call's transaction, so
  // the token is good once in the whole cluster. Empty: not recorded.
  std::string token;
  int64_t token_expires_at = 0;
};
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, manage_request& x) {
  return f(caf::meta::type_name("manage_request"), x.community_id, x.caller, x.body,
           x.deadline_steady_ns, x.token, x.token_expires_at);
}

// The HTTP answer: 200 with {"result"} or {"error"}, 400 for malformed
// JSON-RPC, 403 for a caller who may not manage the community.
struct manage_reply {
  uint16_t http_status = 200;
  std::string body;
  // A key the call took out of the community, committed: whoever answers the
  // caller first ends that key's subscriptions (access_revoked to the hub).
  std::string revoked;
};
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, manage_reply& x) {
  return f(caf::meta::type_name("manage_reply"), x.http_status, x.body, x.revoked);
}

}  // namespace waggle
