#pragma once

// The node's HTTP/WebSocket front door: a TCP acceptor on its own io_context
// and io threads. Routes by Host to a community; WebSocket upgrades on "/"
// become ws_sessions wired to a connection actor (node_api::open_connection).
//
//   GET /healthz, /readyz, /metrics  node-level (any Host)
//   GET / + Accept: application/nostr+json  NIP-11 (with CORS; OPTIONS too)
//   GET / + Upgrade: websocket       the relay
//   POST /events                     NIP-98-authenticated event submission

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "gateway/node_api.hpp"

namespace waggle::gateway {

class server {
 public:
  // `port` 0 binds an ephemeral port (see start()). `io_threads` 0: one per
  // core. Every socket's handlers and timers run on its own strand, the
  // acceptor's on another, so any number of threads is safe.
  server(node_api api, server_limits limits, std::string bind_address = "0.0.0.0",
         uint16_t port = 0, std::size_t io_threads = 2);
  // Stops without a grace period if shutdown() was not called.
  ~server();

  server(const server&) = delete;
  server& operator=(const server&) = delete;

  // Binds, listens and starts the io threads. Returns the bound port. Throws
  // boost::system::system_error if the address cannot be bound.
  uint16_t start();

  // Closes the listening socket; open connections carry on. Idempotent.
  void stop_accepting();

  // Stops accepting, answers new requests and upgrades with 503, closes every
  // WebSocket with 1001 "going away" (after its queued frames), waits until
  // they are gone or `bound` has passed, then stops the io threads. Sockets
  // still open then are dropped; their connection actors get socket_closed.
  void shutdown(std::chrono::seconds bound = std::chrono::seconds{10});

  // The bound port (0 before start()).
  uint16_t port() const;
  // WebSocket sessions currently admitted (handshaking or open).
  std::size_t websocket_count() const;

 private:
  struct impl;
  std::unique_ptr<impl> impl_;
};

}  // namespace waggle::gateway
