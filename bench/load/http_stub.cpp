#include "bench/load/http_stub.hpp"

#include <chrono>

#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http.hpp>

namespace waggle::bench {

namespace http = boost::beast::http;
using boost::asio::ip::tcp;

int64_t http_stub::now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
           std::chrono::steady_clock::now().time_since_epoch())
    .count();
}

// One accepted connection; lives as long as a handler (or, stalled, the
// stub's held list) holds it.
struct http_stub::session : std::enable_shared_from_this<session> {
  session(http_stub& owner, tcp::socket s) : owner(owner), socket(std::move(s)) {}

  void read() {
    request = {};
    http::async_read(socket, buffer, request,
                     [self = shared_from_this()](boost::system::error_code ec, size_t) {
                       self->on_read(ec);
                     });
  }

  void on_read(boost::system::error_code ec) {
    if (ec)
      return;  // the peer closed or gave up (its timeout); nothing to answer
    auto status = owner.on_request_(request, now_ns());
    if (status == stall)
      return owner.hold(shared_from_this());
    response = {static_cast<http::status>(status), request.version()};
    response.set(http::field::content_type, "application/json");
    response.keep_alive(request.keep_alive());
    response.body() = "{}";
    response.prepare_payload();
    http::async_write(socket, response,
                      [self = shared_from_this()](boost::system::error_code ec, size_t) {
                        if (ec)
                          return;
                        if (self->response.keep_alive())
                          return self->read();
                        boost::system::error_code ignored;
                        self->socket.shutdown(tcp::socket::shutdown_both, ignored);
                      });
  }

  http_stub& owner;
  tcp::socket socket;
  boost::beast::flat_buffer buffer;
  http::request<http::string_body> request;
  http::response<http::string_body> response;
};

http_stub::http_stub(uint16_t port, handler on_request)
    : on_request_(std::move(on_request)), acceptor_(ioc_) {
  tcp::endpoint at{boost::asio::ip::make_address("127.0.0.1"), port};
  acceptor_.open(at.protocol());
  // The bench script gives the same ports to every run against one relay.
  acceptor_.set_option(tcp::acceptor::reuse_address(true));
  acceptor_.bind(at);
  acceptor_.listen();
  port_ = acceptor_.local_endpoint().port();
  accept();
  thread_ = std::thread([this] { ioc_.run(); });
}

http_stub::~http_stub() { stop(); }

std::string http_stub::url(const std::string& path) const {
  return "http://127.0.0.1:" + std::to_string(port_) + path;
}

void http_stub::accept() {
  acceptor_.async_accept([this](boost::system::error_code ec, tcp::socket s) {
    if (ec)
      return;  // closed by stop()
    std::make_shared<session>(*this, std::move(s))->read();
    accept();
  });
}

void http_stub::hold(const std::shared_ptr<session>& s) {
  std::lock_guard lock{mutex_};
  // Bounded: a run sends a stalled peer at most a few thousand requests.
  if (held_.size() < 100'000)
    held_.push_back(s);
}

void http_stub::stop() {
  {
    std::lock_guard lock{mutex_};
    if (stopped_)
      return;
    stopped_ = true;
  }
  // Sessions still reading keep the loop busy: stop it outright, then close
  // what is left from this thread (the io thread is gone).
  ioc_.stop();
  if (thread_.joinable())
    thread_.join();
  boost::system::error_code ignored;
  acceptor_.close(ignored);
  std::lock_guard lock{mutex_};
  for (auto& s : held_)
    s->socket.close(ignored);
  held_.clear();
}

}  // namespace waggle::bench
