#pragma once

// The NATS bus driver's settings (docs/bus.md, "NATS").

#include <chrono>
#include <cstddef>
#include <string>

namespace waggle {

struct nats_bus_settings {
  std::string url = "nats://127.0.0.1:4222";
  std::string node_id;  // names the node's request inboxes and its NATS connection
  std::chrono::milliseconds connect_timeout{2000};
  // Reconnects go on forever, waiting from reconnect_min doubling to reconnect_max.
  std::chrono::milliseconds reconnect_min{100};
  std::chrono::milliseconds reconnect_max{2000};
  // What libnats holds of this node's publishes while it reconnects;
  // beyond it a publish is refused (unavailable).
  int reconnect_buffer = 8 * 1024 * 1024;
  // A dead server or link is noticed after ping_interval * (max_pings_out + 1).
  std::chrono::milliseconds ping_interval{2000};
  int max_pings_out = 2;
  // How long a subscribe waits for the server to confirm it (a PING/PONG).
  std::chrono::milliseconds flush_timeout{2000};
  // Per NATS subscription, what libnats holds before it drops (slow consumer).
  int pending_msgs = 65536;
  int pending_bytes = 64 * 1024 * 1024;
  // Messages handed from libnats to the facade and not yet delivered; beyond
  // either, the next are dropped and the subscribers get bus_lagged.
  size_t max_in_flight = 65536;
  size_t max_in_flight_bytes = 256 * 1024 * 1024;
  size_t max_requests = 65536;  // open requests; beyond: overloaded
};

}  // namespace waggle
