#pragma once

// The node's link from its fanout hub to the other nodes (docs/scaling.md):
// - waggle.cluster.commits: after the hub fans out a local commit, the relay
//   rings every other node's doorbell (the payload is this node's id; no
//   events travel: each node reads them from the database, in commit order
//   and without gaps, through its cluster tail); one ring per `coalesce`
//   window, with a trailing ring that always follows;
// - waggle.cluster.ephemeral: ephemeral events, which are stored nowhere,
//   travel whole (at most once), and reach the other nodes' hubs after their
//   signatures are checked again (the bus is a network path).
// - waggle.node.<id>.roster: roster publications (docs/scaling.md, "Roster
//   publications"): a channel's roster is published by one owner among the
//   live nodes (rendezvous hashing over the registry, read once a second),
//   which coalesces every node's changes; the fence stays the authority, so
//   an owner that does not answer in time only means this node publishes.
// A ring from another node wakes the tail; a lag notice wakes it too.

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <caf/stateful_actor.hpp>

#include "actors/support/env.hpp"
#include "messages/interfaces.hpp"

namespace waggle {

struct cluster_relay_settings {
  std::string node_id;
  caf::timespan coalesce = std::chrono::milliseconds(2);
  // How often it checks that the current hub knows it (the supervisor may
  // have restarted the hub) and retries subscriptions that failed.
  caf::timespan tick = std::chrono::milliseconds(200);
  caf::timespan answer_bound = std::chrono::seconds(10);
  // How long a barrier waits for each other node; one that has not
  // answered by then is reported unconfirmed.
  uint32_t barrier_timeout_ms = 2000;
  // How long a roster request waits for the owner before publishing here.
  uint32_t roster_timeout_ms = 1000;
  // How often the live nodes (the roster owners' candidates) are read.
  caf::timespan nodes_refresh = std::chrono::seconds(1);
  // Off: other nodes' rings are not listened to (the tail reads on its poll).
  bool doorbell = true;
};

inline constexpr const char* cluster_commits_subject = "waggle.cluster.commits";
inline constexpr const char* cluster_ephemeral_subject = "waggle.cluster.ephemeral";
// Where a node answers another's barrier (cluster_barrier in messages/cluster.hpp).
std::string cluster_barrier_subject(const std::string& node_id);
// Where a node takes roster publications of the channels it owns.
std::string cluster_roster_subject(const std::string& node_id);

// The channel's roster owner among `nodes` (ids; empty: none): the highest
// of a fixed hash of (node, community, channel), so every node that sees
// the same registry picks the same owner, and a node joining or leaving
// moves only the channels it wins or held.
std::string roster_owner(const std::vector<std::string>& nodes, int64_t community_id,
                         const std::string& channel);

struct cluster_relay_state {
  static inline const char* name = "cluster_relay";
  using ptr = cluster_relay_actor::stateful_pointer<cluster_relay_state>;

  ptr self = nullptr;
  bus_actor bus;
  cluster_tail_actor tail;
  std::function<hub_actor()> current_hub;  // the supervisor's latest hub
  std::function<group_actor()> current_group;
  cluster_relay_settings settings;
  node_env env;

  hub_actor attached;  // the hub that was last told about this relay
  // The subjects it subscribes to, and whether each is (a failed subscribe
  // is retried on the next tick, one at a time).
  std::vector<std::pair<std::string, bool>> subjects;
  bool subscribing = false;
  steady_time last_ring{};
  bool ring_pending = false;  // a commit came inside the window: ring at its end
  bool trailing_scheduled = false;
  // The live nodes, this one included (read by the tail from the registry).
  std::vector<std::string> live_nodes;
  bool nodes_known = false;
  bool nodes_reading = false;
  steady_time nodes_read_at{};

  void init(ptr self, bus_actor bus, cluster_tail_actor tail,
            std::function<hub_actor()> current_hub, std::function<group_actor()> current_group,
            cluster_relay_settings settings, node_env env);
  void on_message(const bus_message& msg);
  void on_lagged(const bus_lagged& msg);
  void on_local_commit();
  void on_local_ephemeral(const cluster_local_ephemeral& msg);
  void on_tick();
  void on_trailing();
  // This node's command waits for every other node.
  caf::typed_response_promise<cluster_barrier_done> on_barrier();
  // This node's change of a channel: its owner publishes the roster.
  caf::typed_response_promise<roster_routed> on_roster_route(const roster_route& msg);

 private:
  void attach();
  void subscribe_missing();
  void ring();
  void publish(const std::string& subject, std::string payload);
  // Another node's barrier: read, let the hub handle it, then answer.
  void answer_barrier(const bus_message& msg);
  // Another node's change of a channel this node owns.
  void answer_roster(const bus_message& msg);
  void read_nodes();
};

cluster_relay_actor::behavior_type cluster_relay_impl(cluster_relay_state::ptr self, bus_actor bus,
                                                      cluster_tail_actor tail,
                                                      std::function<hub_actor()> current_hub,
                                                      std::function<group_actor()> current_group,
                                                      cluster_relay_settings settings,
                                                      node_env env);

// The bus payloads it sends and reads: messages/proto/bus_payloads.hpp.

}  // namespace waggle
