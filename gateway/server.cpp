#include "gateway/server.hpp"

#include <algorithm>
#include <future>
#include <thread>
#include <vector>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/beast/websocket.hpp>

#include "gateway/http_session.hpp"
#include "gateway/log.hpp"
#include "gateway/server_state.hpp"
#include "gateway/ws_session.hpp"

namespace waggle::gateway {

namespace net = boost::asio;
namespace beast = boost::beast;
using tcp = net::ip::tcp;

struct server::impl {
  impl(node_api api, server_limits limits, std::string addr, uint16_t port, std::size_t threads)
    : st(std::make_shared<server_state>(std::move(api), limits)),
      bind_address(std::move(addr)),
      requested_port(port),
      io_threads(threads != 0 ? threads
                            : std::max<std::size_t>(1, std::thread::hardware_concurrency())),
      ioc(std::make_unique<net::io_context>(static_cast<int>(io_threads))),
      acceptor(std::make_unique<tcp::acceptor>(net::make_strand(*ioc))),
      retry_timer(std::make_unique<net::steady_timer>(acceptor->get_executor())),
      work(net::make_work_guard(*ioc)) {}

  std::shared_ptr<server_state> st;
  std::string bind_address;
  uint16_t requested_port;
  uint16_t bound_port = 0;
  std::size_t io_threads;
  // Destroyed explicitly in stop(), in this order: timer, acceptor, io_context.
  std::unique_ptr<net::io_context> ioc;
  std::unique_ptr<tcp::acceptor> acceptor;
  std::unique_ptr<net::steady_timer> retry_timer;
  net::executor_work_guard<net::io_context::executor_type> work;
  std::vector<std::thread> threads;
  bool accepting = false;
  bool stopped = false;

  void do_accept() {
    acceptor->async_accept(net::make_strand(*ioc), [this](beast::error_code ec, tcp::socket s) {
      on_accept(ec, std::move(s));
    });
  }

  void on_accept(beast::error_code ec, tcp::socket socket) {
    if (!accepting || !acceptor->is_open())
      return;
    if (ec) {
      if (ec == net::error::operation_aborted)
        return;
      // EMFILE and friends: back off instead of spinning.
      log::warn(st->api, "accept", ec.message());
      retry_timer->expires_after(std::chrono::milliseconds(100));
      retry_timer->async_wait([this](beast::error_code e) {
        if (!e && accepting)
          do_accept();
      });
      return;
    }
    admit(std::move(socket));
    do_accept();
  }

  // Decides what a new TCP connection may do before its first byte is read:
  // everything; only the health endpoints (the reserve above the TCP cap);
  // or hear a 429 (its address is over its cap or bucket). Beyond the
  // reserve it is closed at once: that bound protects the fds.
  void admit(tcp::socket socket) {
    const size_t held = st->tcp_count.fetch_add(1);
    auto mode = http_session::admission::open;
    if (held >= st->max_tcp() + st->limits.health_reserve) {
      st->tcp_count.fetch_sub(1);
      log::debug(st->api, "too many TCP connections, dropping one");
      if (st->api.watch)
        st->api.watch->refused("tcp_saturated");
      beast::error_code ignored;
      socket.close(ignored);
      return;
    }
    beast::error_code ignored;
    socket.set_option(tcp::no_delay(true), ignored);
    if (st->limits.socket_send_buffer)
      socket.set_option(net::socket_base::send_buffer_size(
                          static_cast<int>(st->limits.socket_send_buffer)),
                        ignored);
    auto slot = std::make_unique<tcp_slot>(st);
    if (held >= st->max_tcp()) {
      mode = http_session::admission::reserve_only;
    } else {
      // A trusted proxy's connections are admitted per request, by the
      // address its X-Forwarded-For names (http_session::admit_request).
      auto peer = peer_ip(socket);
      if (!peer.empty() && !is_trusted_proxy(peer, st->trusted)) {
        auto v = slot->admit_ip(peer);
        if (v == ip_table::verdict::too_many)
          mode = http_session::admission::too_many;
        else if (v == ip_table::verdict::too_fast)
          mode = http_session::admission::too_fast;
      }
    }
    std::make_shared<http_session>(std::move(socket), st, std::move(slot), mode)->run();
  }

  static std::string peer_ip(const tcp::socket& socket) {
    beast::error_code ec;
    auto ep = socket.remote_endpoint(ec);
    return ec ? std::string{} : canonical_ip(ep.address().to_string());
  }

  // Runs `f` on the acceptor's strand and waits for it (or runs it inline when
  // the io threads are not running).
  template <class F>
  void on_acceptor_strand(F f) {
    if (threads.empty() || ioc->stopped()) {
      f();
      return;
    }
    std::promise<void> p;
    auto fut = p.get_future();
    net::post(acceptor->get_executor(), [&] {
      f();
      p.set_value();
    });
    fut.wait();
  }

  void stop_accepting() {
    if (stopped)
      return;
    on_acceptor_strand([this] {
      accepting = false;
      beast::error_code ignored;
      retry_timer->cancel();
      acceptor->close(ignored);
    });
  }

  void stop() {
    if (stopped)
      return;
    stop_accepting();
    stopped = true;
    st->shutting_down = true;
    work.reset();
    ioc->stop();
    for (auto& t : threads)
      t.join();
    threads.clear();
    // From here on nobody may post onto the io_context; then destroy it, and
    // with it every session still inside (their actors get socket_closed).
    st->gate->close();
    retry_timer.reset();
    acceptor.reset();
    ioc.reset();
  }
};

server::server(node_api api, server_limits limits, std::string bind_address, uint16_t port,
               std::size_t io_threads)
  : impl_(std::make_unique<impl>(std::move(api), limits, std::move(bind_address), port,
                                 io_threads)) {}

server::~server() { impl_->stop(); }

uint16_t server::start() {
  auto& i = *impl_;
  if (i.stopped)
    throw std::logic_error("waggle::gateway::server: start() after shutdown");
  if (!i.threads.empty())
    return i.bound_port;
  tcp::endpoint ep{net::ip::make_address(i.bind_address), i.requested_port};
  i.acceptor->open(ep.protocol());
  i.acceptor->set_option(net::socket_base::reuse_address(true));
  i.acceptor->bind(ep);
  i.acceptor->listen(net::socket_base::max_listen_connections);
  i.bound_port = i.acceptor->local_endpoint().port();
  i.accepting = true;
  i.do_accept();
  for (std::size_t n = 0; n < i.io_threads; ++n)
    i.threads.emplace_back([ioc = i.ioc.get(), st = i.st] {
      for (;;) {
        try {
          ioc->run();
          return;
        } catch (const std::exception& e) {
          // A handler threw: log and keep the io thread alive.
          log::warn(st->api, "io thread caught", e.what());
        }
      }
    });
  return i.bound_port;
}

void server::stop_accepting() { impl_->stop_accepting(); }

void server::shutdown(std::chrono::seconds bound) {
  auto& i = *impl_;
  if (i.stopped)
    return;
  const auto deadline = std::chrono::steady_clock::now() + bound;
  i.stop_accepting();
  i.st->shutting_down = true;
  std::vector<std::weak_ptr<ws_session>> sessions;
  {
    std::lock_guard lock{i.st->registry_mtx};
    for (auto& [ptr, weak] : i.st->registry)
      sessions.push_back(weak);
  }
  const auto going_away = static_cast<uint16_t>(beast::websocket::close_code::going_away);
  for (auto& w : sessions)
    i.st->gate->post_to(w, [going_away](ws_session& s) { s.begin_close(going_away, "going away"); });
  {
    std::unique_lock lock{i.st->registry_mtx};
    i.st->registry_cv.wait_until(lock, deadline, [&] { return i.st->registry.empty(); });
  }
  i.stop();
}

uint16_t server::port() const { return impl_->bound_port; }

std::size_t server::websocket_count() const { return impl_->st->ws_count.load(); }

}  // namespace waggle::gateway
