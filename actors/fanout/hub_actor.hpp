#pragma once

// The fanout hub: the node's local subscription index. For each committed (or
// ephemeral) event it finds candidate subscriptions through an index keyed by
// id, tag value, author and kind (each filter is filed under its most
// selective field), confirms each candidate with the full filter match, and
// sends each connection one live_event naming every subscription it matched,
// so an event reaches each matching subscription exactly once.

#include <cstdint>
#include <map>
#include <string>
#include <unordered_map>
#include <vector>

#include "actors/fanout/recent_events.hpp"
#include "actors/support/env.hpp"
#include "messages/interfaces.hpp"

namespace waggle {

// Pure index, testable without a mailbox.
class subscription_index {
 public:
  using conn_id = caf::actor_addr;

  struct match {
    connection_actor conn;
    std::vector<std::string> sub_ids;
    std::vector<uint64_t> generations;  // parallel to sub_ids
  };

  void add(const connection_actor& conn, int64_t community_id, const std::string& sub_id,
           uint64_t generation, std::vector<proto::filter> filters);
  void remove(const caf::actor_addr& conn, const std::string& sub_id);
  void remove_connection(const caf::actor_addr& conn);
  // Connections (in no particular order) with the subscriptions `ev` matches.
  // An event of a channel (an `h` tag) matches only filters that name
  // channels with `#h`: those were access-checked when the REQ was made.
  std::vector<match> find(int64_t community_id, const proto::event& ev) const;
  // Every connection with a subscription in the community (for revocations).
  std::vector<connection_actor> connections_in(int64_t community_id) const;
  size_t size() const { return subs_.size(); }
  // Index keys in use (what the subscriptions' filters are filed under).
  size_t keys() const { return index_.size(); }

 private:
  struct entry {
    connection_actor conn;
    int64_t community_id = 0;
    std::string sub_id;
    uint64_t generation = 0;
    std::vector<proto::filter> filters;
    std::vector<uint64_t> keys;  // index keys this entry is filed under
  };
  // An index key is a 64-bit hash of (community, dimension, value): every
  // candidate is confirmed by the full filter match, so a collision costs a
  // match, never a wrong delivery. As strings the keys were two thirds of a
  // wide subscription's memory (docs/operations.md, "Subscription memory").
  static uint64_t key_of(int64_t community_id, char dimension, std::string_view value,
                         std::string_view value2 = {});
  static std::vector<uint64_t> keys_for(int64_t community_id, const proto::filter& f);

  uint64_t next_handle_ = 0;
  std::unordered_map<uint64_t, entry> subs_;
  std::unordered_map<uint64_t, std::vector<uint64_t>> index_;
  std::map<std::pair<caf::actor_addr, std::string>, uint64_t> by_conn_;
  // find()'s working memory, reused across calls (so find() is const but,
  // like the whole index, for one thread: the hub's).
  mutable std::vector<uint64_t> scratch_candidates_;
  mutable std::vector<std::pair<caf::actor_id, uint64_t>> scratch_hits_;  // (connection, handle)
};

struct hub_state;
using hub_ptr = hub_actor::stateful_pointer<hub_state>;

struct hub_state {
  static inline const char* name = "hub";

  hub_ptr self = nullptr;
  subscription_index index;
  node_env env;

  // In a cluster (docs/scaling.md): the relay that carries this node's
  // commits and ephemeral events to the others, and the committed events
  // fanned out lately, so the copy of a local commit that the cluster tail
  // reads back is not fanned out again. Alone, neither is used.
  bool clustered = false;  // spawned by clustered_hub_actor_impl
  cluster_relay_actor relay;
  recent_events recent;
  // What it sends the relay, numbered while a trace is recorded (a replay
  // runs no relay: docs/traces.md, "The cluster"); 0 when not recorded.
  uint64_t relay_sent = 0;
  template <class Msg>
  uint64_t trace_to_relay(const Msg& msg);

  void init(hub_ptr self_ptr, node_env e);
  // A local commit: fanned out, then the relay rings the other nodes.
  void on_committed(const committed_events& batch);
  // What the database says committed anywhere: fanned out unless seen.
  void on_cluster_committed(const cluster_committed& batch);
  void on_cluster_ephemeral(const cluster_ephemeral& msg);
  void on_attach(const cluster_attach& msg);
  // Asks the relay to wait for every other node (answered at once alone).
  caf::typed_response_promise<cluster_barrier_done> on_barrier();
  // Fans `items` out; returns how many were new (not seen lately). Items
  // `from_database` (the tail's) also carry the revocations their events
  // imply, for commands another node ran.
  size_t fan_out(const std::vector<ingest_item>& items, bool from_database = false,
                 bool remember = true);
  void revoke_for(const ingest_item& item);
  // Fans one ephemeral event out now; the ack releases the sender's in-flight slot.
  hub_ack on_ephemeral(const ephemeral_publish& msg);
  hub_ack on_subscribe(hub_subscribe& req);
  void on_unsubscribe(const hub_unsubscribe& req);
  void on_revoked(const channel_revoked& msg);
  // Passed to every subscribed connection of the community, in mailbox
  // order with the live events, like channel_revoked.
  void on_revoked(const access_revoked& msg);
  caf::typed_response_promise<roster_routed> on_roster_route(const roster_route& msg);
  void on_down(const caf::down_msg& msg);
};

hub_actor::behavior_type hub_actor_impl(hub_ptr self, node_env env);
// The hub of a node in a cluster (--bus other than inproc): it remembers what
// it fanned out from its first event, before the relay attaches, and fails
// a barrier closed while no relay is attached.
hub_actor::behavior_type clustered_hub_actor_impl(hub_ptr self, node_env env);

}  // namespace waggle
