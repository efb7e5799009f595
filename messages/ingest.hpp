#pragma once

// What ingest and its writer sessions take: events to store, the batches of
// one transaction, ingest's own timer and the start-up fence probe. Each
// struct's `inspect` is beside it; the type IDs are in messages/type_ids.hpp.

#include <cstdint>
#include <string>
#include <vector>

#include <caf/meta/type_name.hpp>

#include "messages/proto/status.hpp"
#include "messages/value_inspect.hpp"
#include "messages/values.hpp"

namespace waggle {

// Connection actor -> ingest. Answered with an ingest_reply only after the
// event's transaction committed (or definitely failed).
struct ingest_request {
  int64_t community_id = 0;
  event_ptr ev;
};
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, ingest_request& x) {
  return f(caf::meta::type_name("ingest_request"), x.community_id, x.ev);
}

struct ingest_reply {
  write_outcome outcome = write_outcome::failed;
  std::string reason;
};
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, ingest_reply& x) {
  return f(caf::meta::type_name("ingest_reply"), x.outcome, x.reason);
}

// Ingest -> writer session: one transaction for all of it.
struct write_batch_request {
  std::vector<ingest_item> items;
  // The push gate (docs/push.md, "The gate cache"): every community's push
  // events run the gate statement when `push_gate_all`, otherwise only
  // those of `push_gated`.
  bool push_gate_all = true;
  std::vector<int64_t> push_gated;
  // One push lease (kind 30350), accepted in its own transaction; `push_skipped`
  // are the events ingest stored without the gate statement in its community.
  bool lease = false;
  std::vector<std::string> push_skipped;
};
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, write_batch_request& x) {
  return f(caf::meta::type_name("write_batch_request"), x.items, x.push_gate_all, x.push_gated,
           x.lease, x.push_skipped);
}

struct write_batch_reply {
  std::vector<write_result> results;
  double commit_seconds = 0;
};
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, write_batch_reply& x) {
  return f(caf::meta::type_name("write_batch_reply"), x.results, x.commit_seconds);
}

// Ingest's commit-delay timer (ingest -> itself): a held batch may go now.
struct ingest_tick {};
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, ingest_tick&) {
  return f(caf::meta::type_name("ingest_tick"));
}

// Start-up (node) -> ingest (every writer) and the group actor (its session):
// is the roster fence in place and working on this connection?
struct fence_probe_request {};
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, fence_probe_request&) {
  return f(caf::meta::type_name("fence_probe_request"));
}

struct fence_probe_reply {
  status err;
};
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, fence_probe_reply& x) {
  return f(caf::meta::type_name("fence_probe_reply"), x.err);
}

}  // namespace waggle
