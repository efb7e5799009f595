#pragma once

// The messages of the delivery pipeline (docs/delivery.md) and its pure
// decisions: what an HTTP answer means for a row, when it is tried again,
// and the --operator-listeners setting. Each struct's `inspect` is beside
// it; the type IDs are in messages/type_ids.hpp.

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <caf/meta/type_name.hpp>

namespace waggle {

// One claimed row, ready to send: where, what, and the fence of its
// completion. `route` names the receiver for logs and metrics (a listener's
// key); the body is built when the row is claimed.
struct delivery_job {
  int64_t community_id = 0;  // the row's key is (community_id, row_id)
  int64_t row_id = 0;
  std::string claim_id;
  std::string delivery_id;  // X-Waggle-Delivery-Id, stable across retries
  std::string route;
  std::string url;
  std::string body;
  int32_t attempts = 0;    // including this one
  int64_t created_at = 0;  // unix seconds, when the row was written
};
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, delivery_job& x) {
  return f(caf::meta::type_name("delivery_job"), x.community_id, x.row_id, x.claim_id,
           x.delivery_id, x.route, x.url, x.body, x.attempts, x.created_at);
}

// What the receiver answered: an HTTP status, or 0 and why there was none.
struct delivery_response {
  uint16_t status = 0;
  std::string error;
};
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, delivery_response& x) {
  return f(caf::meta::type_name("delivery_response"), x.status, x.error);
}

// -- supervisor <-> store (the detached actor that owns the queue's connection) --

// `max_rows` is the free slots; `per_route_max` (0: no cap) bounds the
// requests one receiver may have out at once, counting `busy_routes` (one
// entry per request out now), so a receiver that never answers holds at most
// that many slots and never the whole supervisor.
struct delivery_claim_request {
  uint32_t max_rows = 0;
  uint32_t per_route_max = 0;
  std::vector<std::string> busy_routes;
};
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, delivery_claim_request& x) {
  return f(caf::meta::type_name("delivery_claim_request"), x.max_rows, x.per_route_max,
           x.busy_routes);
}
struct delivery_claim_reply {
  std::vector<delivery_job> jobs;
  // Milliseconds until the earliest pending row is due (a scheduled retry),
  // when the claim left the queue without due rows; -1: none pending.
  int64_t next_due_ms = -1;
  bool failed = false;  // the database did not answer: poll later
};
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, delivery_claim_reply& x) {
  return f(caf::meta::type_name("delivery_claim_reply"), x.jobs, x.next_due_ms, x.failed);
}

// `gone` (410): the receiver says the address is no more; the push queue
// disables the lease generation it was sent for, others treat it as terminal.
enum class delivery_verdict : uint8_t { delivered, retry, terminal, gone };

struct delivery_complete_request {
  delivery_job job;
  delivery_verdict verdict = delivery_verdict::delivered;
  int64_t retry_after_ms = 0;
};
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, delivery_complete_request& x) {
  return f(caf::meta::type_name("delivery_complete_request"), x.job, x.verdict, x.retry_after_ms);
}
enum class delivery_completion : uint8_t { done, dropped, fenced, failed };
struct delivery_complete_reply {
  delivery_completion result = delivery_completion::done;
};
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, delivery_complete_reply& x) {
  return f(caf::meta::type_name("delivery_complete_reply"), x.result);
}

// Several completions in one transaction (a supervisor with a completion
// delay, docs/push.md: one commit for a burst of answers); results aligned.
struct delivery_complete_batch {
  std::vector<delivery_complete_request> requests;
};
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, delivery_complete_batch& x) {
  return f(caf::meta::type_name("delivery_complete_batch"), x.requests);
}
struct delivery_complete_batch_reply {
  std::vector<delivery_complete_reply> results;
};
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, delivery_complete_batch_reply& x) {
  return f(caf::meta::type_name("delivery_complete_batch_reply"), x.results);
}
// The supervisor's timer for writing held completions.
struct delivery_flush {};
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, delivery_flush&) {
  return f(caf::meta::type_name("delivery_flush"));
}

// -- supervisor <-> slots ------------------------------------------------------

struct delivery_attempt {
  delivery_job job;
};
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, delivery_attempt& x) {
  return f(caf::meta::type_name("delivery_attempt"), x.job);
}
// The HTTP client -> the slot: the receiver's answer (a boundary input).
struct delivery_response_in {
  delivery_response response;
};
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, delivery_response_in& x) {
  return f(caf::meta::type_name("delivery_response_in"), x.response);
}
struct delivery_done {
  uint32_t slot = 0;
  delivery_job job;
  delivery_response response;
};
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, delivery_done& x) {
  return f(caf::meta::type_name("delivery_done"), x.slot, x.job, x.response);
}

// -- listen actor -> supervisor ------------------------------------------------

// Committed work may be waiting: a notification, or the catch-up after a
// (re)connected LISTEN.
struct delivery_wake {
  bool catch_up = false;
};
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, delivery_wake& x) {
  return f(caf::meta::type_name("delivery_wake"), x.catch_up);
}
// Whether notifications arrive (the liveness probe's verdict).
struct listener_health {
  bool up = false;
};
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, listener_health& x) {
  return f(caf::meta::type_name("listener_health"), x.up);
}
// The supervisor's poll timer; ticks of an older generation are stale.
struct delivery_tick {
  uint64_t generation = 0;
};
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, delivery_tick& x) {
  return f(caf::meta::type_name("delivery_tick"), x.generation);
}
// The listen actor's loop step: wait a little for notifications, probe.
struct listen_tick {};
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, listen_tick&) {
  return f(caf::meta::type_name("listen_tick"));
}

// -- registrations (POST/GET /operator/listener/pubkeys) ---------------------

struct listener_registration_request {
  int64_t community_id = 0;
  std::string listener;  // the NIP-98-proven key, a configured listener
  bool list = false;     // GET
  std::string body;      // POST: {"pubkeys": [...]}
};
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, listener_registration_request& x) {
  return f(caf::meta::type_name("listener_registration_request"), x.community_id, x.listener,
           x.list, x.body);
}
struct listener_registration_reply {
  uint16_t http_status = 200;
  std::string body;  // JSON
};
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, listener_registration_reply& x) {
  return f(caf::meta::type_name("listener_registration_reply"), x.http_status, x.body);
}
// The registry's timer: reap old registrations and outbox rows.
struct listener_reap_tick {};
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, listener_reap_tick&) {
  return f(caf::meta::type_name("listener_reap_tick"));
}

// -- pure decisions ------------------------------------------------------------

// 2xx delivered; 408, 429, 5xx and no answer: retry; 410 gone; anything
// else (3xx included: redirects are not followed) terminal.
delivery_verdict classify_delivery(const delivery_response& r);

// 2^(attempt-1) seconds, the exponent capped at `max_exponent`.
std::chrono::milliseconds delivery_backoff(int32_t attempt, int32_t max_exponent = 7);

// How long a claim holds its row: a request may take `request_timeout`, and
// its completion must land before the lease runs out, or another claimer
// sends the row again while the first request may still succeed (twice at
// once). Twice the timeout plus 10 s, at least 30 s.
std::chrono::seconds delivery_lease(std::chrono::milliseconds request_timeout);

// The registration body: {"pubkeys": [64 hex, ...]} with 1..max keys, each
// lowercase 64 hex. On error, `why` says what is wrong.
bool parse_listener_pubkeys(std::string_view body, size_t max, std::vector<std::string>& keys,
                            std::string& why);

}  // namespace waggle
