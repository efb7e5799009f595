#pragma once

// One asynchronous WebSocket client connection of the load tool. Every
// callback runs on the connection's strand, so a role object that keeps its
// timers on executor() needs no locks. Writes follow Beast's discipline: one
// in flight, the rest queued (the tool never outpaces the relay by more than
// its window, so the queue stays short).

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/strand.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/websocket/stream.hpp>

namespace waggle::bench {

struct ws_target {
  std::string host;         // address to connect to
  uint16_t port = 0;
  std::string host_header;  // Host: chooses the community
  std::string path = "/";
};

// Parses ws://host[:port][/path]; nullopt if it is not one.
std::optional<ws_target> parse_ws_url(const std::string& url);

class ws_conn : public std::enable_shared_from_this<ws_conn> {
 public:
  using strand = boost::asio::strand<boost::asio::io_context::executor_type>;
  using message_fn = std::function<void(std::string_view)>;
  using status_fn = std::function<void(const std::string& error)>;  // "" = success

  explicit ws_conn(boost::asio::io_context& ioc);

  strand& executor() { return strand_; }
  void on_message(message_fn fn) { on_message_ = std::move(fn); }
  // Called once when the connection ends after having opened (error "" for a
  // close we asked for).
  void on_closed(status_fn fn) { on_closed_ = std::move(fn); }

  // Resolves, connects, upgrades; then reads until the end.
  void open(const ws_target& target, const boost::asio::ip::tcp::endpoint& endpoint,
            status_fn opened);
  void send(std::string frame);
  void close();
  bool is_open() const { return open_; }

 private:
  void read();
  void write_next();
  void ended(const std::string& error);

  strand strand_;
  boost::beast::websocket::stream<boost::beast::tcp_stream> ws_;
  boost::beast::flat_buffer buffer_;
  std::deque<std::string> outbox_;
  bool writing_ = false;
  bool open_ = false;
  bool closing_ = false;
  bool ended_ = false;
  message_fn on_message_;
  status_fn on_closed_;
};

}  // namespace waggle::bench
