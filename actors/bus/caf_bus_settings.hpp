#pragma once

// The CAF bus driver's settings (docs/bus.md, "CAF").

#include <chrono>
#include <cstdint>
#include <string>

#include <caf/fwd.hpp>

namespace waggle {

struct caf_bus_settings {
  std::string database_url;  // the registry (bus_nodes)
  std::string node_id;       // [A-Za-z0-9_-], 1-64 characters, unique in the cluster
  std::string address = "127.0.0.1";  // where peers reach this node's bus
  uint16_t port = 0;                  // 0: any free port
  int32_t protocol_version = 1;
  std::chrono::seconds heartbeat{10};
  std::chrono::seconds node_ttl{30};
  std::chrono::milliseconds refresh{2000};  // how often the registry lists the live peers
  std::chrono::milliseconds reconnect_min{100};
  std::chrono::milliseconds reconnect_max{5000};
  // How long a subscribe waits for peers to confirm the new interest.
  std::chrono::milliseconds interest_timeout{2000};
  std::chrono::milliseconds connect_timeout{5000};
  // Forwards a peer may have unconfirmed before publishes to it wait (its
  // mailbox and the link hold at most about this many of this node's).
  size_t window = 4096;
  std::chrono::milliseconds sync_timeout{5000};
  size_t max_held = 65536;  // publishes waiting for a window; beyond: overloaded
  // Bounds on what peers can make this node hold.
  size_t max_peers = 256;
  size_t max_interest = 65536;  // (subject, group) pairs one peer may want
  size_t max_requests = 65536;  // open requests of this node
};

// Loads the middleman and names the bus protocol in the BASP handshake
// (middleman.app-identifiers): a node of another protocol version is refused
// at connect. Call before the actor system is made.
void configure_caf_bus(caf::actor_system_config& cfg, int32_t protocol_version);

// Whether `id` is a valid node id.
bool bus_valid_node_id(const std::string& id);

}  // namespace waggle
