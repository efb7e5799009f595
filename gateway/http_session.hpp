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
  // What the server decided at accept (server.cpp): `open` serves anything;
  // the others answer /healthz, /readyz and /metrics once and everything else
  // with 503 (reserve_only: TCP saturated) or 429 (the address is over its
  // cap or its new-connections bucket), then close.
  enum class admission { open, reserve_only, too_many, too_fast };

  http_session(boost::asio::ip::tcp::socket&& socket, std::shared_ptr<server_state> st,
               std::unique_ptr<tcp_slot> slot, admission mode = admission::open);

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
  // Time a connection admitted only for an answer gets to send its request.
  static constexpr std::chrono::seconds restricted_timeout{2};

 private:
  using request = boost::beast::http::request<boost::beast::http::string_body>;
  using response = boost::beast::http::response<boost::beast::http::string_body>;

  void do_read();
  void on_header(boost::beast::error_code ec, std::size_t);
  void on_continue_sent(boost::beast::error_code ec, std::size_t);
  void on_body(boost::beast::error_code ec, std::size_t);
  bool handle_read_error(boost::beast::error_code ec);
  void handle();
  // http_request_admission.cpp: the client's address (X-Forwarded-For from trusted
  // proxies), its per-address slot, and the answer of a restricted
  // connection. False when the request has been answered (refused).
  bool admit_request(std::string_view path);
  bool is_node_path(std::string_view path) const;
  void refuse(boost::beast::http::status status, std::string_view label, std::string body);
  // Reserves a WebSocket and an unauthenticated slot; answers and returns
  // false when either cap is reached.
  bool reserve_websocket();
  // At the unauthenticated cap: tells the oldest unauthenticated WebSocket
  // old enough to go; false when there is none.
  bool evict_oldest_unauthenticated();
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
  // The request as the node takes it (its body moved out).
  http_event_request request_in(const std::string& host);
  // `done` for the node: the reply is handed back to this session's io
  // thread and answers only the request numbered `seq` (a late reply after a
  // timeout must not answer the next request on a keep-alive connection).
  template <class Reply>
  std::function<void(Reply)> answer_on_io(uint64_t seq, void (http_session::*on)(Reply)) {
    return [weak = weak_from_this(), gate = st_->gate, seq, on](Reply reply) {
      gate->post_to(weak, [seq, on, r = std::move(reply)](http_session& s) mutable {
        if (s.awaiting_reply_ && s.submit_seq_ == seq)
          (s.*on)(std::move(r));
      });
    };
  }
  static constexpr size_t listener_body_limit = 128u << 10;
  size_t body_limit_ = 0;
  void handle_listener_registration(const community& c, const std::string& host);
  void handle_cluster(const community& c, const std::string& host);
  void on_json_reply(http_rpc_reply reply);
  void on_rpc_reply(http_rpc_reply reply);
  // Arms the reply timeout of a request the node answers; `on_timeout` runs
  // on the session's strand if no reply came first. Returns the request's number.
  uint64_t await_reply(std::function<void(http_session&)> on_timeout);
  response make(boost::beast::http::status status, std::string content_type, std::string body);
  void send(response res, bool close = false);
  void on_write(bool close, boost::beast::error_code ec, std::size_t);
  void do_close();
  void do_drain();
  // Closes a refused or restricted connection right after its answer,
  // giving its TCP slot back (no lingering close).
  void close_now();

  boost::beast::tcp_stream stream_;
  boost::beast::flat_buffer buffer_;
  std::shared_ptr<server_state> st_;
  std::unique_ptr<tcp_slot> slot_;
  std::optional<boost::beast::http::request_parser<boost::beast::http::string_body>> parser_;
  request req_;
  std::shared_ptr<response> res_;  // alive while being written
  boost::asio::steady_timer submit_timer_;
  std::string peer_ip_;    // the TCP peer (a proxy, maybe)
  std::string remote_ip_;  // the client's address, for the node's write policy
  admission admission_ = admission::open;
  bool close_after_ = false;  // restricted or refused: one answer, then close_now
  bool awaiting_reply_ = false;
  uint64_t submit_seq_ = 0;
  std::string drain_;
  std::size_t drained_ = 0;
};

}  // namespace waggle::gateway
