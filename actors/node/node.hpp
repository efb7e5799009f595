#pragma once

// One relay node: the actor system, the supervisor and its children, the
// relay's key, and the node_api the gateway calls. main() and the end-to-end
// tests build a node the same way.

#include <chrono>
#include <memory>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <set>
#include <unordered_map>

#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>

#include "actors/bus/bus_probe.hpp"
#include "actors/node/config.hpp"
#include "actors/support/seen_tokens.hpp"
#include "db/push_store.hpp"
#include "actors/connection/connection_actor.hpp"
#include "actors/ingest/ingest_actor.hpp"
#include "actors/policy/write_policy_plugin.hpp"
#include "actors/support/env.hpp"
#include "actors/node/node_supervisor.hpp"
#include "actors/node/gateway_observer.hpp"
#include "gateway/node_api.hpp"
#include "messages/proto/nip11.hpp"

namespace waggle {

class node {
 public:
  node(node_config cfg, node_env env);
  ~node();

  gateway::node_api api();
  const std::string& relay_pubkey() const { return relay_pubkey_; }
  bool ready() const { return snapshot_->ready(); }

  // Fail-closed start-up (docs/channels.md): the roster fence must be in
  // place and working on every writer connection and the group session, and
  // stale roster snapshots are repaired. Serve only if this returns ok; the
  // error names the migration to re-apply.
  status start_checks();

  // Starts delivery to operator listeners (docs/delivery.md) once the node
  // serves: a node that refuses to start never POSTs, and a trace, which
  // starts recording when the node serves, holds the delivery actors from
  // their first message (a replay rebuilds them as spawned). No-op without
  // --operator-listeners, or when started already.
  void start_delivery();
  // Starts the node's presence on the bus (bus_probe: answers pings, times
  // probes), likewise once recording started, so a trace holds its first
  // subscribes. No-op when started already.
  void start_bus_probe();

  // SIGTERM: refuse new work, let connections answer what is in flight and
  // close with 1001; returns when all closed or `bound` passed.
  void drain(std::chrono::milliseconds bound);
  void stop();

  caf::actor_system& system() { return *system_; }
  // The current handles of the supervised actors (event_loader sends to
  // ingest and the group actor as the gateway's actors do).
  std::shared_ptr<const node_handles> handles() const { return board_->get(); }
  size_t open_connections() const;
  // The node's bus (docs/bus.md), of the driver --bus chose.
  bus_actor bus() const { return bus_; }
  const std::string& node_id() const { return node_id_; }

 private:
  void submit_event(const community& c, gateway::http_event_request request,
                    std::function<void(gateway::http_event_reply)> done);
  connection_actor open_connection(const community& c, const std::string& host,
                                   const std::string& remote_ip, socket_sink_ptr sink);
  void listener_registration(const community& c, gateway::http_event_request request,
                             std::function<void(gateway::http_rpc_reply)> done);
  void manage(const community& c, gateway::http_event_request request,
              std::function<void(gateway::http_rpc_reply)> done);
  // The actor that answers one NIP-86 call or listener registration.
  http_api_actor spawn_http_api(const community& c, const std::string& name_prefix,
                                std::function<void(gateway::http_rpc_reply)> done,
                                bool detached = false);
  // GET /cluster: the registry, for an operator (docs/scaling.md).
  void cluster_info(const community& c, gateway::http_event_request request,
                    std::function<void(gateway::http_rpc_reply)> done);

  node_config cfg_;
  node_env env_;
  std::string relay_pubkey_;
  std::unique_ptr<caf::actor_system_config> sys_cfg_;
  std::unique_ptr<caf::actor_system> system_;
  std::shared_ptr<handle_board> board_;
  std::shared_ptr<community_snapshot> snapshot_;
  // Node-wide subscription memory, shared by every connection actor.
  memory_budget_ptr subscription_budget_;
  // NIP-77 sets have a budget of their own: a client holding sets can refuse
  // other clients' sets, never another community's REQ (red team).
  memory_budget_ptr negentropy_budget_;
  // Gives freed subscription memory back to the system (node.cpp, trim_loop).
  void trim_loop();
  std::thread trimmer_;
  std::mutex trim_mtx_;
  std::condition_variable trim_cv_;
  bool trim_stop_ = false;
  // Read buckets per pubkey and per address, shared by every connection
  // (docs/protocol.md, "Read limits"; docs/actor-rules.md, rule 1).
  std::shared_ptr<shared_read_buckets> read_buckets_;
  node_supervisor_actor supervisor_;
  // NIP-86 calls (docs/management.md): owned by the node, not supervised;
  // it survives a lost database through its session's reconnect.
  // NIP-86 calls, by community: a call stuck on a lock holds up only the
  // communities of its worker (docs/management.md).
  static constexpr size_t management_workers = 4;
  std::vector<management_actor> management_;
  std::string node_id_;
  bus_actor bus_;
  void start_bus();
  bus_probe_actor bus_probe_;
  void start_cluster();
  cluster_relay_actor cluster_relay_;  // none with the in-process bus
  cluster_tail_actor cluster_tail_;
  push_gate_relay_actor push_gate_relay_;  // clustered, with push and the gate cache
  std::atomic<bool> draining_{false};
  std::atomic<uint64_t> connections_opened_{0};  // names them conn-1, conn-2, ... in traces
  std::atomic<uint64_t> http_requests_{0};       // http-1, http-2, ...
  // POST /events in flight, by community (cfg max_http_submits*). Shared with
  // each request's actor, which gives its slot back when it ends.
  struct submit_slots {
    std::mutex mtx;
    size_t total = 0;
    std::unordered_map<int64_t, size_t> by_community;
    std::unordered_map<std::string, size_t> by_address;
  };
  // One POST's place in all three counts, given back when destroyed.
  struct submit_slot {
    submit_slot(std::shared_ptr<submit_slots> s, int64_t c, std::string a)
      : slots(std::move(s)), community(c), ip(std::move(a)) {}
    ~submit_slot();
    // Null when a cap is reached.
    static std::shared_ptr<submit_slot> take(const std::shared_ptr<submit_slots>& slots,
                                             const node_config& cfg, int64_t community,
                                             const std::string& ip);
    std::shared_ptr<submit_slots> slots;
    int64_t community;
    std::string ip;
    std::shared_ptr<waggle::metrics> stats;  // its in-flight gauge, when there is one
  };
  std::shared_ptr<submit_slots> submits_ = std::make_shared<submit_slots>();
  // NIP-98 tokens used on this node, refused a second time (seen_tokens.hpp).
  std::shared_ptr<seen_tokens> seen_tokens_ = std::make_shared<seen_tokens>();
  mutable std::mutex conn_mtx_;
  std::set<connection_actor> connections_;
};

// The settings a node derives from its config; a trace replay derives them
// the same way from the trace header.
connection_settings connection_settings_for(const node_config& cfg,
                                            const std::string& relay_pubkey,
                                            int64_t community_id, const std::string& host,
                                            bool community_open = true);
ingest_settings ingest_settings_for(const node_config& cfg);
// The writer sessions' push lease acceptance (docs/push.md).
db::lease_settings lease_settings_for(const node_config& cfg);
write_policy_settings write_policy_settings_for(const node_config& cfg);
proto::filter_limits filter_limits_for(const node_config& cfg);
// NIP-11 for one community: its own text over the node's defaults.
proto::relay_info relay_info_for(const node_config& cfg, const std::string& relay_pubkey,
                                 const community& c);

// The trace header's "node" object: the settings a replay needs to rebuild
// the node's actors (docs/traces.md), and node_config_from_trace's inverse.
// `bus_node_id`: the node's id on the bus when its bus probe runs (the replay
// spawns one with it); empty: none.
std::string trace_node_json(const node_config& cfg, const std::string& relay_pubkey,
                            const std::string& bus_node_id = {});
// The bus probe's settings for a node (and for a replay, from the header).
bus_probe_settings bus_probe_settings_for(const std::string& node_id, int64_t probe_ms);

// Loads the relay's secret key from `path`, creating it (mode 0600) if
// missing. Returns the secret hex; never logged.
std::string load_or_create_relay_key(const std::string& path);

}  // namespace waggle
