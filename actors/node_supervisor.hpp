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

#include "actors/community_directory.hpp"
#include "actors/config.hpp"
#include "actors/connection_actor.hpp"
#include "actors/env.hpp"
#include "db/group_store.hpp"

namespace waggle {

struct node_handles {
  ingest_actor ingest;
  hub_actor hub;
  reader_actor reader;
  group_actor group;
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

enum class child : uint8_t { hub = 0, ingest, reader, directory, group, count };

struct supervisor_state {
  node_config cfg;
  node_env env;
  db::relay_signer signer;  // handed to the group session only
  std::shared_ptr<handle_board> board;
  std::shared_ptr<community_snapshot> snapshot;
  node_handles handles;
  directory_actor directory;
  std::array<caf::actor_addr, static_cast<size_t>(child::count)> addrs;
  std::array<int, static_cast<size_t>(child::count)> restarts{};
  static inline const char* name = "node_supervisor";
};

using supervisor_actor = caf::typed_actor<caf::reacts_to<restart_child>>;

supervisor_actor::behavior_type
node_supervisor_impl(supervisor_actor::stateful_pointer<supervisor_state> self, node_config cfg,
                     node_env env, db::relay_signer signer, std::shared_ptr<handle_board> board,
                     std::shared_ptr<community_snapshot> snapshot);

}  // namespace waggle
