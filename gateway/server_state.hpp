#pragma once

// Internal to the gateway: what the server shares with its sessions. Sessions
// hold it by shared_ptr; the io_context itself stays in `server`.

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <unordered_map>

#include <boost/asio/post.hpp>

#include "gateway/node_api.hpp"

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
  server_state(node_api a, server_limits l) : api(std::move(a)), limits(l) {}

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

  // Open WebSocket sessions, for shutdown's 1001.
  std::mutex registry_mtx;
  std::condition_variable registry_cv;
  std::unordered_map<ws_session*, std::weak_ptr<ws_session>> registry;

  bool draining() const {
    return shutting_down.load() || (api.draining && api.draining());
  }
  // TCP connections beyond this are closed right after accept (fd protection).
  size_t max_tcp() const { return limits.max_connections + limits.max_connections / 10 + 64; }
};

// Moves with the socket from http_session to ws_session; releases the TCP
// count once, when the owner of the socket goes away.
class tcp_slot {
 public:
  explicit tcp_slot(std::shared_ptr<server_state> st) : st_(std::move(st)) {}
  tcp_slot(const tcp_slot&) = delete;
  tcp_slot& operator=(const tcp_slot&) = delete;
  ~tcp_slot() { st_->tcp_count.fetch_sub(1); }

 private:
  std::shared_ptr<server_state> st_;
};

}  // namespace waggle::gateway
