#pragma once

// The PostgreSQL bus driver's settings (docs/bus.md, "PostgreSQL"), shared
// by the facade and its workers.

#include <chrono>
#include <cstddef>
#include <string>

#include "db/bus_store.hpp"

namespace waggle {

struct pg_bus_settings {
  std::string database_url;
  std::string node_id;   // unique in the cluster; names the node's inboxes
  std::string address;   // what the registry tells peers (the CAF driver's)
  int port = 0;
  std::chrono::seconds retention{30};  // messages older are garbage
  std::chrono::seconds node_ttl{30};   // a node silent this long is gone
  std::chrono::seconds heartbeat{10};
  std::chrono::milliseconds poll{1000};          // the fetcher's backstop
  std::chrono::milliseconds doorbell_window{5};  // at most one NOTIFY per shard per window
  std::chrono::milliseconds listen_wait{50};     // one listener step's longest block
  std::chrono::milliseconds maintenance{5000};   // garbage collection and node expiry
  std::chrono::milliseconds reconnect_max{5000};
  // Any statement of the driver's connections (a hung server costs a reconnect).
  std::chrono::milliseconds statement_timeout{10000};
  // Publishes waiting for the publisher beyond this are refused (overloaded).
  size_t max_waiting = 65536;
  size_t max_waiting_bytes = 256 * 1024 * 1024;
  int gc_batch = 10000;
  db::bus::fetch_bounds fetch;
  size_t max_batch = 256;                  // messages in one publish transaction
  size_t max_batch_bytes = 8 * 1024 * 1024;
};

}  // namespace waggle
