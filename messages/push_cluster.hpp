#pragma once

// The push gate across a cluster (docs/push.md, "Several nodes"): before a
// lease is written, every other live node's ingest gates its community and
// names the push events its batches stored without the gate, so the lease's
// backfill holds them; a node that starts learns the gated communities only
// after it is in the registry, so no lease can be written that it was
// neither asked about nor loaded.

#include <cstdint>
#include <string>
#include <vector>

#include <caf/meta/type_name.hpp>
#include <caf/typed_actor.hpp>

#include "messages/bus.hpp"

namespace waggle {

// Ingest -> gate relay: a lease for this community reached this node;
// answer once every other live node gates it.
struct cluster_gate_request {
  int64_t community_id = 0;
};
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, cluster_gate_request& x) {
  return f(caf::meta::type_name("cluster_gate_request"), x.community_id);
}

struct cluster_gate_done {
  std::vector<std::string> skipped;      // event ids (hex) other nodes stored ungated
  std::vector<std::string> unconfirmed;  // live nodes that did not answer (fail closed)
};
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, cluster_gate_done& x) {
  return f(caf::meta::type_name("cluster_gate_done"), x.skipped, x.unconfirmed);
}

// Gate relay -> ingest: another node is about to write a lease for this
// community. Ingest gates it at once and answers when every batch it had
// dispatched before has finished, with the push events they stored ungated.
struct push_gate_remote {
  int64_t community_id = 0;
};
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, push_gate_remote& x) {
  return f(caf::meta::type_name("push_gate_remote"), x.community_id);
}
struct push_gate_drained {
  std::vector<std::string> skipped;
};
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, push_gate_drained& x) {
  return f(caf::meta::type_name("push_gate_drained"), x.skipped);
}

// Gate relay -> ingest: the communities to gate, read after this node's
// registry row committed (so a lease written later either asked this node
// or was preceded by an intent this read sees) (live leases and recent gate intents). Replaces
// the matcher's push_gate_loaded on a clustered node.
struct cluster_gate_loaded {
  bool ok = false;
  std::vector<int64_t> communities;
};
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, cluster_gate_loaded& x) {
  return f(caf::meta::type_name("cluster_gate_loaded"), x.ok, x.communities);
}

struct push_gate_relay_tick {};
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, push_gate_relay_tick&) {
  return f(caf::meta::type_name("push_gate_relay_tick"));
}

using push_gate_relay_actor = bus_subscriber_actor::extend<
  caf::replies_to<cluster_gate_request>::with<cluster_gate_done>,
  caf::reacts_to<push_gate_relay_tick>>;

// Gate relay -> ingest: ask `relay` before writing a lease (a new ingest
// learns it on the relay's next tick; until then a lease is refused).
struct push_gate_attach {
  push_gate_relay_actor relay;
};
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, push_gate_attach& x) {
  return f(caf::meta::type_name("push_gate_attach"), x.relay);
}

}  // namespace waggle
