#pragma once

// A stand-in HTTP/1.1 endpoint for the relay's outbound webhooks (operator
// listeners, the push gateway): a server on 127.0.0.1 with an io thread of
// its own, so the time it stamps on a request is when the request was read,
// not when some other part of the tool got round to it. For each request the
// owner's handler (called on the io thread) records what it wants and says
// how to answer: a status, or `stall` (the request is read and never
// answered; the socket is held until stop(), which is what a hung peer looks
// like to the relay). Keep-alive is honoured, as the relay's client may reuse
// a connection.
//
// Needs only Boost and the standard library, so end-to-end tests can link it
// (target waggle_http_stub) without the load tool.

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/http/message.hpp>
#include <boost/beast/http/string_body.hpp>

namespace waggle::bench {

class http_stub {
 public:
  using request = boost::beast::http::request<boost::beast::http::string_body>;
  static constexpr int stall = -1;
  // Returns the status to answer with, or `stall`. `at_ns`: steady clock,
  // when the whole request had been read.
  using handler = std::function<int(const request& req, int64_t at_ns)>;

  // Binds 127.0.0.1:port (0: any free port) and starts serving; throws on failure.
  http_stub(uint16_t port, handler on_request);
  ~http_stub();
  http_stub(const http_stub&) = delete;
  http_stub& operator=(const http_stub&) = delete;

  uint16_t port() const { return port_; }
  std::string url(const std::string& path) const;
  // Closes every socket and joins the io thread; idempotent. The handler is
  // not called after it returns.
  void stop();

  static int64_t now_ns();  // the steady clock the stamps use (same as bench now_ns())

 private:
  struct session;
  void accept();
  void hold(const std::shared_ptr<session>& s);

  handler on_request_;
  boost::asio::io_context ioc_;
  boost::asio::ip::tcp::acceptor acceptor_;
  uint16_t port_ = 0;
  std::mutex mutex_;
  std::vector<std::shared_ptr<session>> held_;  // stalled requests, never answered
  std::thread thread_;
  bool stopped_ = false;
};

}  // namespace waggle::bench
