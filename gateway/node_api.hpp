#pragma once

// What the gateway needs from the node. The gateway (Beast, io threads) never
// touches actor state: it calls these, and they hand work to actors with
// messages. Every callback may be invoked from any thread.

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gateway/metrics_access.hpp"
#include "gateway/observer.hpp"
#include "gateway/socket_sink.hpp"
#include "messages/interfaces.hpp"
#include "messages/values.hpp"

namespace waggle::gateway {

// The answer to POST /events, decided above the gateway (messages/outcome.hpp):
// the gateway only renders it.
struct http_event_reply {
  std::string id;
  bool accepted = false;
  std::string message;        // NIP-01 style "prefix: reason"
  uint16_t http_status = 200;
};

// A POST /events as it arrived; the node verifies its NIP-98 Authorization
// and the event off the io threads.
struct http_event_request {
  std::string authorization;  // the header value, as sent
  std::string host;           // the Host header, as sent (NIP-98 compares it)
  std::string target;         // path and query
  std::string body;
  std::string remote_ip;      // the client's address ("" if unknown; IPv4-mapped shown as IPv4)
  std::string method = "POST";
};

// The answer to a NIP-86 call: a JSON-RPC body (application/nostr+json+rpc).
struct http_rpc_reply {
  uint16_t http_status = 200;
  std::string body;
};

struct server_limits {
  size_t max_frame_bytes = 64 * 1024;     // larger frames close with 1009
  size_t max_outbound_frames = 1000;      // queued frames before a slow client is dropped
  size_t max_outbound_bytes = 8u << 20;   // queued bytes before a slow client is dropped
  size_t max_connections = 10000;
  std::chrono::seconds ping_interval{30};
  // -- admission (docs/operations.md, "Connections") --------------------------
  // Open connections per client address, WebSockets and pending HTTP together
  // (0 = no cap); beyond it 429.
  size_t max_connections_per_ip = 64;
  // New connections per address: a bucket of `burst` refilled at `rate`/s
  // (rate 0 = no bucket); beyond it 429.
  double new_connections_per_second = 10;
  double new_connections_burst = 40;
  // IPv6 clients are counted per prefix of this many bits (IPv4 per address):
  // the per-address cap, the new-connections bucket and the read buckets.
  unsigned ipv6_prefix = 64;
  // Peers whose X-Forwarded-For is believed (canonical IP addresses).
  std::vector<std::string> trusted_proxies;
  // A WebSocket without a successful NIP-42 AUTH by then is closed (0 = never).
  std::chrono::seconds auth_deadline{15};
  // WebSockets not (yet) authenticated (0 = max_connections/4). At the cap a
  // new upgrade evicts the oldest unauthenticated socket, if one is at least
  // unauth_evict_age old; else it gets 503.
  size_t max_unauthenticated = 0;
  std::chrono::milliseconds unauth_evict_age{3000};
  // TCP slots above the connection cap that only serve /healthz, /readyz and
  // /metrics (one request each, read within reserve_timeout).
  size_t health_reserve = 16;
  // -- outbound memory --------------------------------------------------------
  // All sessions' queued outbound bytes; beyond it the biggest queue is dropped.
  size_t max_outbound_bytes_total = 256u << 20;
  // SO_SNDBUF of every accepted socket (0 = the kernel's autotuning).
  size_t socket_send_buffer = 256u << 10;
  // A session whose queued frames made no write progress for this long is
  // closed, whatever it sends (0 = never).
  std::chrono::seconds write_stall{30};

  size_t unauthenticated_cap() const {
    return max_unauthenticated ? max_unauthenticated : std::max<size_t>(1, max_connections / 4);
  }
  metrics_access metrics_allow;  // who may read /metrics (403 for the others)
};

struct node_api {
  // Host (as sent, any case, maybe with port) -> live community. Lock-free snapshot.
  std::function<std::optional<community>(std::string_view host)> find_community;
  // Spawns the connection actor of a new socket. `host` is the Host header as
  // sent (the node normalizes it and keeps its port for NIP-42's relay tag);
  // `remote_ip` the client's address as http_event_request has it.
  std::function<connection_actor(const community&, const std::string& host,
                                 const std::string& remote_ip, socket_sink_ptr)>
    open_connection;
  // POST /events: verifies the NIP-98 Authorization and the event (id,
  // signature, window) off the io threads, checks that the event's pubkey is
  // the one NIP-98 proved and ingests it; `done` is called exactly once, from
  // any thread.
  std::function<void(const community&, http_event_request request,
                     std::function<void(http_event_reply)> done)>
    submit_event;
  // NIP-86 (POST with Content-Type application/nostr+json+rpc, any path):
  // verifies the NIP-98 Authorization (payload required) off the io threads
  // and runs the call; `done` is called exactly once, from any thread.
  std::function<void(const community&, http_event_request request,
                     std::function<void(http_rpc_reply)> done)>
    manage;
  // POST/GET /operator/listener/pubkeys (docs/delivery.md): NIP-98 by a
  // configured listener key, verified off the io threads; `done` gets a JSON
  // body (http_rpc_reply's status and body, served as application/json),
  // exactly once, from any thread. Null: 404.
  std::function<void(const community&, http_event_request request,
                     std::function<void(http_rpc_reply)> done)>
    listener_registration;
  // GET /cluster (docs/scaling.md): NIP-98 by an operator key, verified off
  // the io threads; `done` gets the registry as JSON, exactly once, from any
  // thread. Null: 404.
  std::function<void(const community&, http_event_request request,
                     std::function<void(http_rpc_reply)> done)>
    cluster;
  // NIP-11 document for a community (JSON text).
  std::function<std::string(const community&)> relay_info;
  // /readyz: database answers and migrations are current.
  std::function<bool()> ready;
  // While draining (SIGTERM), new sockets and requests get 503.
  std::function<bool()> draining;
  // Logs, connection counts and /metrics; may be null (tests).
  std::shared_ptr<observer> watch;
};

}  // namespace waggle::gateway
