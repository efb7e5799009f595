#pragma once

// Internal to the gateway: what the server shares with its sessions. Sessions
// hold it by shared_ptr; the io_context itself stays in `server`.

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <shared_mutex>
#include <unordered_map>

#include <boost/asio/post.hpp>

#include "gateway/ip_admission.hpp"
#include "gateway/node_api.hpp"
#include "gateway/unauth_queue.hpp"

namespace waggle::gateway {

class ws_session;

// Guards posting onto the server's io_context from foreign threads (actors,
// submit_event callbacks). Sessions are owned only by handlers inside the
// io_context; foreign threads hold them weakly and lock them only inside the
// gate, so no strong reference can escape past close(). Once closed the
// io_context may be destroyed (and with it every session).
class post_gate {
 public:
  // Runs f(T&) on `w`'s strand if both the gate and the object are alive.
  template <class T, class F>
  bool post_to(const std::weak_ptr<T>& w, F&& f) {
    std::shared_lock lock{mtx_};
    if (!open_)
      return false;
    auto s = w.lock();
    if (!s)
      return false;
    auto ex = s->executor();
    boost::asio::post(ex, [s = std::move(s), f = std::forward<F>(f)]() mutable { f(*s); });
    return true;
  }
  void close() {
    std::unique_lock lock{mtx_};
    open_ = false;
  }

 private:
  std::shared_mutex mtx_;
  bool open_ = true;
};

struct server_state {
  server_state(node_api a, server_limits l)
    : api(std::move(a)),
      limits(std::move(l)),
      per_ip(limits.max_connections_per_ip, limits.new_connections_per_second,
             limits.new_connections_burst) {
    for (auto& p : limits.trusted_proxies)
      if (auto ip = canonical_ip(p); !ip.empty())
        trusted.push_back(ip);
  }

  node_api api;
  server_limits limits;
  std::shared_ptr<post_gate> gate = std::make_shared<post_gate>();

  // Set by server::shutdown: new upgrades and requests get 503.
  std::atomic<bool> shutting_down{false};

  // WebSocket sessions, counted from the moment an upgrade is admitted until
  // the session object is destroyed (enforces max_connections).
  std::atomic<size_t> ws_count{0};
  // TCP connections currently owned by an http_session or ws_session.
  std::atomic<size_t> tcp_count{0};
  // WebSockets admitted whose connection has not completed NIP-42 AUTH.
  std::atomic<size_t> unauth_count{0};
  // Those of them past their handshake, oldest first: eviction candidates.
  unauth_queue<ws_session> unauth_sessions;
  // Bytes queued in every session's outbound queue.
  std::atomic<size_t> outbound_bytes{0};
  // Open connections and new-connection buckets by client address.
  ip_table per_ip;
  std::vector<std::string> trusted;  // limits.trusted_proxies, canonical

  // Open WebSocket sessions, for shutdown's 1001.
  std::mutex registry_mtx;
  std::condition_variable registry_cv;
  std::unordered_map<ws_session*, std::weak_ptr<ws_session>> registry;

  bool draining() const {
    return shutting_down.load() || (api.draining && api.draining());
  }
  // TCP connections beyond this are closed right after accept (fd protection).
  size_t max_tcp() const { return limits.max_connections + limits.max_connections / 10 + 64; }

  // Why a load balancer should stop sending us connections, if it should.
  std::optional<std::string> saturation() const {
    if (tcp_count.load() >= max_tcp() || ws_count.load() >= limits.max_connections)
      return "connections saturated";
    if (unauth_count.load() >= limits.unauthenticated_cap())
      return "unauthenticated connections saturated";
    if (limits.max_outbound_bytes_total && outbound_bytes.load() >= limits.max_outbound_bytes_total)
      return "outbound budget exhausted";
    return std::nullopt;
  }

  // The gateway's own gauges, appended to the node's /metrics text.
  std::string gauges_text() const {
    std::string out;
    auto gauge = [&out](const char* name, const char* help, size_t v) {
      out += std::string("# HELP ") + name + " " + help + "\n# TYPE " + name + " gauge\n" + name
             + " " + std::to_string(v) + "\n";
    };
    gauge("waggle_tcp_connections", "TCP connections held by the gateway", tcp_count.load());
    gauge("waggle_unauthenticated_connections",
          "WebSockets that have not completed NIP-42 AUTH", unauth_count.load());
    gauge("waggle_outbound_bytes", "bytes queued to clients, all sessions", outbound_bytes.load());
    return out;
  }
};

// Moves with the socket from http_session to ws_session; releases the TCP
// count once, when the owner of the socket goes away.
class tcp_slot {
 public:
  explicit tcp_slot(std::shared_ptr<server_state> st) : st_(std::move(st)) {}
  tcp_slot(const tcp_slot&) = delete;
  tcp_slot& operator=(const tcp_slot&) = delete;
  ~tcp_slot() {
    release_ip();
    st_->tcp_count.fetch_sub(1);
  }

  // The per-address slot this connection holds in server_state::per_ip,
  // under the address's key (an IPv6 client's prefix).
  ip_table::verdict admit_ip(const std::string& ip) {
    auto key = address_key(ip, st_->limits.ipv6_prefix);
    auto v = st_->per_ip.admit(key);
    if (v == ip_table::verdict::admitted)
      ip_ = std::move(key);
    return v;
  }
  // A later request of the connection names another client (through a proxy).
  ip_table::verdict move_ip(const std::string& ip) {
    if (!ip_)
      return admit_ip(ip);
    auto key = address_key(ip, st_->limits.ipv6_prefix);
    if (*ip_ == key)
      return ip_table::verdict::admitted;
    auto v = st_->per_ip.transfer(*ip_, key);
    if (v == ip_table::verdict::admitted)
      ip_ = std::move(key);
    return v;
  }
  bool holds_ip() const { return ip_.has_value(); }

 private:
  void release_ip() {
    if (ip_)
      st_->per_ip.release(*ip_);
    ip_.reset();
  }
  std::shared_ptr<server_state> st_;
  std::optional<std::string> ip_;  // its address_key
};

}  // namespace waggle::gateway
