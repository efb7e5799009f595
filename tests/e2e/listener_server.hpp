#pragma once

// A stand-in operator listener for end-to-end tests: an HTTP server on
// 127.0.0.1 that records every request (with when it arrived) and answers
// with what the test chose for its path: a status, a redirect, or never
// (the socket is held open until the server stops).

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

namespace waggle::e2e {

class listener_server {
 public:
  struct received {
    std::string target;
    std::map<std::string, std::string> headers;
    std::string body;
    std::chrono::steady_clock::time_point at;
  };
  static constexpr int hang = -1;

  listener_server() : acceptor_(io_, {boost::asio::ip::make_address("127.0.0.1"), 0}) {
    port_ = acceptor_.local_endpoint().port();
    thread_ = std::thread([this] { serve(); });
  }
  ~listener_server() {
    stopping_ = true;
    boost::system::error_code ec;
    {
      // Closing the acceptor from here does not end a blocking accept() on
      // Linux: a connection of our own does.
      boost::asio::io_context io;
      boost::asio::ip::tcp::socket poke(io);
      poke.connect({boost::asio::ip::make_address("127.0.0.1"), port_}, ec);
    }
    if (thread_.joinable())
      thread_.join();
    acceptor_.close(ec);
    {
      std::lock_guard lk(m_);
      for (auto& s : held_)
        s->close(ec);
    }
    cv_.notify_all();
    for (auto& t : workers_)
      t.join();
  }

  uint16_t port() const { return port_; }
  std::string url(const std::string& path) const {
    return "http://127.0.0.1:" + std::to_string(port_) + path;
  }
  // What `path` answers from now on (default 200); `hang` never answers.
  void answer(const std::string& path, int status) {
    std::lock_guard lk(m_);
    modes_[path] = status;
  }
  // Waits until `n` requests for `path` arrived (or `within` passed).
  std::vector<received> wait_for(const std::string& path, size_t n,
                                 std::chrono::milliseconds within = std::chrono::seconds(10)) {
    std::unique_lock lk(m_);
    cv_.wait_for(lk, within, [&] { return count_locked(path) >= n; });
    std::vector<received> out;
    for (const auto& r : got_)
      if (r.target == path)
        out.push_back(r);
    return out;
  }
  size_t count(const std::string& path) {
    std::lock_guard lk(m_);
    return count_locked(path);
  }

 private:
  size_t count_locked(const std::string& path) const {
    size_t n = 0;
    for (const auto& r : got_)
      n += r.target == path;
    return n;
  }
  void serve() {
    while (!stopping_) {
      auto sock = std::make_shared<boost::asio::ip::tcp::socket>(io_);
      boost::system::error_code ec;
      acceptor_.accept(*sock, ec);
      if (ec || stopping_)
        return;
      std::lock_guard lk(m_);
      workers_.emplace_back([this, sock] { handle(sock); });
    }
  }
  void handle(std::shared_ptr<boost::asio::ip::tcp::socket> sock) {
    namespace http = boost::beast::http;
    boost::beast::flat_buffer buf;
    http::request<http::string_body> req;
    boost::system::error_code ec;
    http::read(*sock, buf, req, ec);
    if (ec)
      return;
    received r;
    r.at = std::chrono::steady_clock::now();
    r.target = std::string(req.target());
    for (const auto& f : req)
      r.headers[std::string(f.name_string())] = std::string(f.value());
    r.body = req.body();
    int mode = 200;
    {
      std::lock_guard lk(m_);
      if (auto it = modes_.find(r.target); it != modes_.end())
        mode = it->second;
      got_.push_back(std::move(r));
      if (mode == hang)
        held_.push_back(sock);
    }
    cv_.notify_all();
    if (mode == hang)
      return;  // held open until the server stops
    http::response<http::string_body> res{static_cast<http::status>(mode), 11};
    if (mode >= 300 && mode < 400)
      res.set(http::field::location, "http://127.0.0.1:1/elsewhere");
    res.body() = "{}";
    res.prepare_payload();
    http::write(*sock, res, ec);
    sock->shutdown(boost::asio::ip::tcp::socket::shutdown_both, ec);
  }

  boost::asio::io_context io_;
  boost::asio::ip::tcp::acceptor acceptor_;
  uint16_t port_ = 0;
  std::atomic<bool> stopping_{false};
  std::thread thread_;
  std::mutex m_;
  std::condition_variable cv_;
  std::map<std::string, int> modes_;
  std::vector<received> got_;
  std::vector<std::shared_ptr<boost::asio::ip::tcp::socket>> held_;
  std::vector<std::thread> workers_;
};

}  // namespace waggle::e2e
