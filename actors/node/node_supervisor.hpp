#pragma once

// The node supervisor spawns the node's long-lived actors (fanout hub,
// ingest with its writer sessions, the reader pool with its sessions, the
// community directory), monitors them, and restarts a crashed one with
// exponential backoff. The current handles are published for the gateway,
// which spawns connection actors with them.

#include <array>
#include <atomic>
#include <chrono>
#include <memory>

#include "actors/communities/community_directory.hpp"
#include "actors/expiry/expiration_reaper.hpp"
#include "actors/reads/heartbeat_prober.hpp"
#include "actors/reads/replica_route.hpp"
#include "actors/node/config.hpp"
#include "actors/connection/connection_actor.hpp"
#include "gateway/http_client.hpp"
#include "actors/support/env.hpp"
#include "db/group_store.hpp"

namespace waggle {

struct node_handles {
  ingest_actor ingest;
  hub_actor hub;
  reader_pool_actor reader;
  group_actor group;
  membership_actor membership;
  write_policy_actor policy;  // null without --write-policy
  listener_registry_actor listeners;  // POST/GET /operator/listener/pubkeys
};

// Written by the supervisor, read by io threads.
class handle_board {
 public:
  std::shared_ptr<const node_handles> get() const { return std::atomic_load(&current_); }
  void set(node_handles h) {
    std::atomic_store(&current_, std::shared_ptr<const node_handles>(
                                   std::make_shared<node_handles>(std::move(h))));
  }

 private:
  std::shared_ptr<const node_handles> current_ = std::make_shared<node_handles>();
};

enum class child : uint8_t {
  hub = 0, ingest, reader, directory, group, membership, expiry, policy, registry, delivery,
  prober, count
};

struct node_supervisor_state;
using node_supervisor_ptr = node_supervisor_actor::stateful_pointer<node_supervisor_state>;

struct node_supervisor_state {
  static inline const char* name = "node_supervisor";

  node_supervisor_ptr self = nullptr;
  node_config cfg;
  node_env env;
  db::relay_signer signer;  // handed to the group session only
  std::shared_ptr<handle_board> board;
  std::shared_ptr<community_snapshot> snapshot;
  node_handles handles;
  community_directory_actor directory;
  expiration_reaper_actor expiry_reaper;  // none with --expiry-reap-seconds 0
  // Replica routing (docs/replicas.md): the ring and the pools outlive
  // restarts of the reader pool and the prober; no prober without replicas.
  std::shared_ptr<heartbeat_ring> ring;
  std::shared_ptr<route_context> routing;
  heartbeat_prober_actor prober;
  delivery_supervisor_actor delivery;     // none without --operator-listeners
  std::shared_ptr<gateway::http_client> http;  // the delivery slots' client
  std::string node_id;                    // names this node's LISTEN probe channel
  std::array<caf::actor_addr, static_cast<size_t>(child::count)> addrs;
  std::array<int, static_cast<size_t>(child::count)> restarts{};

  void init(node_supervisor_ptr self_ptr, node_config config, node_env e,
            db::relay_signer relay_signer, std::shared_ptr<handle_board> handle_board_ptr,
            std::shared_ptr<community_snapshot> community_snapshot_ptr);
  void on_restart(restart_child msg);
  void on_down(const caf::down_msg& msg);
  void on_exit(const caf::exit_msg& msg);

 private:
  void spawn_child(child which);
  void spawn_hub();
  void spawn_ingest();
  void spawn_reader();
  void spawn_directory();
  void spawn_group();
  void spawn_membership();
  void spawn_expiry_reaper();
  void spawn_prober();
  void spawn_policy();
  void spawn_registry();
  void spawn_delivery();
  template <class Handle>
  void watch(child which, const Handle& h);
};

node_supervisor_actor::behavior_type
node_supervisor_actor_impl(node_supervisor_ptr self, node_config cfg, node_env env,
                           db::relay_signer signer, std::shared_ptr<handle_board> board,
                           std::shared_ptr<community_snapshot> snapshot);

}  // namespace waggle
