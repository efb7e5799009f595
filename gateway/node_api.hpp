#pragma once

// What the gateway needs from the node. The gateway (Beast, io threads) never
// touches actor state: it calls these, and they hand work to actors with
// messages. Every callback may be invoked from any thread.

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include <caf/actor.hpp>

#include "actors/metrics.hpp"
#include "actors/socket_sink.hpp"
#include "db/community_store.hpp"

namespace waggle::gateway {

struct http_event_reply {
  std::string id;
  bool accepted = false;
  std::string message;  // NIP-01 style "prefix: reason"
};

struct server_limits {
  size_t max_frame_bytes = 64 * 1024;     // larger frames close with 1009
  size_t max_outbound_frames = 1000;      // queued frames before a slow client is dropped
  size_t max_outbound_bytes = 8u << 20;   // queued bytes before a slow client is dropped
  size_t max_connections = 10000;
  std::chrono::seconds ping_interval{30};
};

struct node_api {
  // Host (as sent, any case, maybe with port) -> live community. Lock-free snapshot.
  std::function<std::optional<db::community>(std::string_view host)> find_community;
  // Spawns the connection actor of a new socket. `host` is the normalized Host.
  std::function<caf::actor(const db::community&, const std::string& host, socket_sink_ptr)>
    open_connection;
  // POST /events: validates (id, signature, window) off the io threads, checks
  // that the event's pubkey equals `auth_pubkey` (from NIP-98) and ingests it;
  // `done` is called exactly once, from any thread.
  std::function<void(const db::community&, std::string event_json, std::string auth_pubkey,
                     std::function<void(http_event_reply)> done)>
    submit_event;
  // NIP-11 document for a community (JSON text).
  std::function<std::string(const db::community&)> relay_info;
  // /readyz: database answers and migrations are current.
  std::function<bool()> ready;
  // While draining (SIGTERM), new sockets and requests get 503.
  std::function<bool()> draining;
  metrics* stats = nullptr;
};

}  // namespace waggle::gateway
