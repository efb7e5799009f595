#pragma once

// Cluster fanout (docs/scaling.md): the messages between the fanout hub, the
// cluster relay (the node's link to the bus) and the cluster tail (its
// commit-ordered reader of the events every node committed).

#include <cstdint>
#include <string>
#include <vector>

#include <caf/meta/type_name.hpp>
#include <caf/typed_actor.hpp>

#include "messages/bus.hpp"
#include "messages/values.hpp"

namespace waggle {

// Hub -> relay: events were committed on this node and fanned out here;
// ring the other nodes' doorbells. Carries no events: every node reads them
// from the database, in commit order and without gaps.
struct cluster_local_commit {
  uint32_t events = 0;
};
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, cluster_local_commit& x) {
  return f(caf::meta::type_name("cluster_local_commit"), x.events);
}

// Hub -> relay: an ephemeral event fanned out here; carry it to the other
// nodes (at most once: ephemeral events are stored nowhere).
struct cluster_local_ephemeral {
  ingest_item item;
};
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, cluster_local_ephemeral& x) {
  return f(caf::meta::type_name("cluster_local_ephemeral"), x.item);
}

// The relay's timers: the periodic one re-attaches to the hub if the
// supervisor replaced it and retries subscriptions; the trailing one rings
// the doorbell that the coalescing window held back.
struct cluster_relay_tick {
  bool trailing = false;
};
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, cluster_relay_tick& x) {
  return f(caf::meta::type_name("cluster_relay_tick"), x.trailing);
}

// Anyone -> hub -> relay: answer once every other live node's hub has
// taken everything committed before this request (its tail read up to a
// snapshot taken after the request arrived, and the hub handled that
// read): what a command that ended someone's access waits for before its
// OK, so no node delivers them anything after it (docs/scaling.md).
struct cluster_barrier {};
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, cluster_barrier&) {
  return f(caf::meta::type_name("cluster_barrier"));
}

struct cluster_barrier_done {
  uint32_t confirmed = 0;                 // nodes that answered
  std::vector<std::string> unconfirmed;   // live nodes that did not, in time
};
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, cluster_barrier_done& x) {
  return f(caf::meta::type_name("cluster_barrier_done"), x.confirmed, x.unconfirmed);
}

// Relay -> hub: answered once the hub handled everything sent to it before
// (a tail read's batches and the revocations they carry).
struct cluster_sync {};
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, cluster_sync&) {
  return f(caf::meta::type_name("cluster_sync"));
}
struct cluster_synced {};
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, cluster_synced&) {
  return f(caf::meta::type_name("cluster_synced"));
}

// Relay -> tail: read now, answer once the read's batches went to the hub;
// and the live nodes of the cluster (the registry, bus_nodes), but this one.
struct cluster_read_now {};
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, cluster_read_now&) {
  return f(caf::meta::type_name("cluster_read_now"));
}
struct cluster_read_done {
  bool ok = false;  // false: the database could not be read
};
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, cluster_read_done& x) {
  return f(caf::meta::type_name("cluster_read_done"), x.ok);
}
struct cluster_nodes_request {};
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, cluster_nodes_request&) {
  return f(caf::meta::type_name("cluster_nodes_request"));
}
struct cluster_nodes {
  bool ok = false;  // false: the registry could not be read (fail closed)
  std::vector<std::string> ids;
};
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, cluster_nodes& x) {
  return f(caf::meta::type_name("cluster_nodes"), x.ok, x.ids);
}

// Roster publications (docs/scaling.md, "Roster publications"): group ->
// hub -> relay, a channel's roster needs publishing; the relay hands it to
// the channel's owner among the live nodes. `elsewhere`: another node took
// it; false: publish here (alone, the owner, or the owner did not answer;
// the database fence stays the authority either way).
struct roster_route {
  int64_t community_id = 0;
  std::string channel;
};
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, roster_route& x) {
  return f(caf::meta::type_name("roster_route"), x.community_id, x.channel);
}
struct roster_routed {
  bool elsewhere = false;
};
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, roster_routed& x) {
  return f(caf::meta::type_name("roster_routed"), x.elsewhere);
}
// Relay -> group: another node asked this one, the channel's owner, to
// publish (a boundary input: traced where the group takes it).
struct roster_requested {
  int64_t community_id = 0;
  std::string channel;
};
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, roster_requested& x) {
  return f(caf::meta::type_name("roster_requested"), x.community_id, x.channel);
}

using cluster_relay_actor = bus_subscriber_actor::extend<
  caf::reacts_to<cluster_local_commit>, caf::reacts_to<cluster_local_ephemeral>,
  caf::reacts_to<cluster_relay_tick>,
  caf::replies_to<cluster_barrier>::with<cluster_barrier_done>,
  caf::replies_to<roster_route>::with<roster_routed>>;

// Relay -> hub: send local commits and ephemeral events to `relay` from now
// on (the hub of a new incarnation learns it on the relay's next tick).
struct cluster_attach {
  cluster_relay_actor relay;
};
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, cluster_attach& x) {
  return f(caf::meta::type_name("cluster_attach"), x.relay);
}

// Tail -> hub: events the database says committed (on any node, this one
// included), in commit order. The hub fans out those it has not fanned out
// already (a local commit reaches it both ways).
struct cluster_committed {
  std::vector<ingest_item> items;
};
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, cluster_committed& x) {
  return f(caf::meta::type_name("cluster_committed"), x.items);
}

// Relay -> hub: an ephemeral event another node fanned out.
struct cluster_ephemeral {
  ingest_item item;
};
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, cluster_ephemeral& x) {
  return f(caf::meta::type_name("cluster_ephemeral"), x.item);
}

// Relay -> tail: a node rang the doorbell; read what committed.
struct cluster_ring {};
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, cluster_ring&) {
  return f(caf::meta::type_name("cluster_ring"));
}

// The tail's poll backstop: read even if no doorbell rang (one was lost,
// or a writer outside the cluster committed).
// `periodic`: the backstop timer, which re-arms itself; else a read the
// tail queued for itself after rings (many rings, one read).
struct cluster_tail_tick {
  bool periodic = true;
};
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, cluster_tail_tick& x) {
  return f(caf::meta::type_name("cluster_tail_tick"), x.periodic);
}

using cluster_tail_actor
  = caf::typed_actor<caf::reacts_to<cluster_ring>, caf::reacts_to<cluster_tail_tick>,
                     caf::replies_to<cluster_read_now>::with<cluster_read_done>,
                     caf::replies_to<cluster_nodes_request>::with<cluster_nodes>>;

}  // namespace waggle
