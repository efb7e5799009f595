#pragma once

// One TCP connection speaking HTTP/1.1 (keep-alive): routes requests, answers
// them, and hands WebSocket upgrades over to a ws_session. Internal to the
// gateway; all state is touched only on the connection's strand.

#include <chrono>
#include <memory>
#include <optional>
#include <string_view>
#include <string>

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include "gateway/server_state.hpp"

namespace waggle::gateway {

class http_session : public std::enable_shared_from_this<http_session> {
 public:
  http_session(boost::asio::ip::tcp::socket&& socket, std::shared_ptr<server_state> st,
               std::unique_ptr<tcp_slot> slot);

  void run();
  boost::beast::tcp_stream::executor_type executor() { return stream_.get_executor(); }

  // Time a client gets to send a whole request (and idle keep-alive time).
  static constexpr std::chrono::seconds request_timeout{30};
  // Time submit_event gets to call `done` before we answer 503.
  static constexpr std::chrono::seconds submit_timeout{30};
  static constexpr std::size_t header_limit = 16 * 1024;
  // Lingering close: how long and how much we read and discard.
  static constexpr std::chrono::seconds linger_timeout{2};
  static constexpr std::size_t linger_max_bytes = 1 << 20;

 private:
  using request = boost::beast::http::request<boost::beast::http::string_body>;
  using response = boost::beast::http::response<boost::beast::http::string_body>;

  void do_read();
  void on_header(boost::beast::error_code ec, std::size_t);
  void on_continue_sent(boost::beast::error_code ec, std::size_t);
  void on_body(boost::beast::error_code ec, std::size_t);
  bool handle_read_error(boost::beast::error_code ec);
  void handle();
  bool handle_node_endpoint(std::string_view path);
  bool refuse_duplicate_host();
  response readiness();
  std::optional<community> community_of(const std::string& host_header, bool upgrade);
  void handle_root(const community& c, const std::string& host_header, bool upgrade);
  void upgrade_to_websocket(const community& c, const std::string& host_header);
  response method_not_allowed(std::string_view path, const char* allow);
  void send_preflight();
  void handle_post_events(const community& c, const std::string& host);
  void on_event_reply(http_event_reply reply);
  void handle_manage(const community& c, const std::string& host);
  void on_rpc_reply(http_rpc_reply reply);
  // Arms the reply timeout of a request the node answers; `on_timeout` runs
  // on the session's strand if no reply came first. Returns the request's number.
  uint64_t await_reply(std::function<void(http_session&)> on_timeout);
  response make(boost::beast::http::status status, std::string content_type, std::string body);
  void send(response res, bool close = false);
  void on_write(bool close, boost::beast::error_code ec, std::size_t);
  void do_close();
  void do_drain();

  boost::beast::tcp_stream stream_;
  boost::beast::flat_buffer buffer_;
  std::shared_ptr<server_state> st_;
  std::unique_ptr<tcp_slot> slot_;
  std::optional<boost::beast::http::request_parser<boost::beast::http::string_body>> parser_;
  request req_;
  std::shared_ptr<response> res_;  // alive while being written
  boost::asio::steady_timer submit_timer_;
  std::string remote_ip_;  // the client's address, for the node's write policy
  bool awaiting_reply_ = false;
  uint64_t submit_seq_ = 0;
  std::string drain_;
  std::size_t drained_ = 0;
};

}  // namespace waggle::gateway
