#include "gateway/http_session.hpp"

#include <cctype>
#include <sstream>

#include <boost/asio/dispatch.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/websocket.hpp>

#include "gateway/log.hpp"
#include "gateway/ws_session.hpp"
#include "messages/proto/client_message.hpp"

namespace waggle::gateway {

namespace beast = boost::beast;
namespace http = beast::http;
namespace websocket = beast::websocket;
namespace net = boost::asio;

namespace {

// The peer's address as text, an IPv4-mapped IPv6 address as plain IPv4 (a
// dual-stack listener reports IPv4 clients that way); "" if unknown.
std::string client_ip(const net::ip::tcp::socket& socket) {
  beast::error_code ec;
  auto ep = socket.remote_endpoint(ec);
  if (ec)
    return {};
  auto addr = ep.address();
  if (addr.is_v6() && addr.to_v6().is_v4_mapped())
    return net::ip::make_address_v4(net::ip::v4_mapped, addr.to_v6()).to_string();
  return addr.to_string();
}

constexpr const char* text_plain = "text/plain; charset=utf-8";
constexpr const char* app_json = "application/json";

bool icontains(std::string_view hay, std::string_view needle) {
  if (needle.size() > hay.size())
    return false;
  for (size_t i = 0; i + needle.size() <= hay.size(); ++i) {
    size_t j = 0;
    while (j < needle.size()
           && std::tolower(static_cast<unsigned char>(hay[i + j]))
                == std::tolower(static_cast<unsigned char>(needle[j])))
      ++j;
    if (j == needle.size())
      return true;
  }
  return false;
}

void add_cors(http::response<http::string_body>& res) {
  res.set(http::field::access_control_allow_origin, "*");
  res.set(http::field::access_control_allow_headers, "Content-Type, Accept, Authorization");
  res.set(http::field::access_control_allow_methods, "GET, POST, OPTIONS");
}

}  // namespace

http_session::http_session(net::ip::tcp::socket&& socket, std::shared_ptr<server_state> st,
                           std::unique_ptr<tcp_slot> slot, admission mode)
  : stream_(std::move(socket)),
    st_(std::move(st)),
    slot_(std::move(slot)),
    submit_timer_(stream_.get_executor()),
    peer_ip_(client_ip(stream_.socket())),
    remote_ip_(peer_ip_),
    admission_(mode) {}

void http_session::run() {
  // The socket's executor is a strand: start there.
  net::dispatch(stream_.get_executor(),
                beast::bind_front_handler(&http_session::do_read, shared_from_this()));
}

void http_session::do_read() {
  parser_.emplace();
  parser_->header_limit(header_limit);
  // The parser checks a Content-Length against this at the end of the
  // header, before the path is known: the largest any path takes. on_header
  // then holds every other path to a frame's size.
  body_limit_ = std::max<size_t>(st_->limits.max_frame_bytes, listener_body_limit);
  parser_->body_limit(body_limit_);
  req_ = {};
  stream_.expires_after(admission_ == admission::open ? request_timeout : restricted_timeout);
  http::async_read_header(stream_, buffer_, *parser_,
                          beast::bind_front_handler(&http_session::on_header, shared_from_this()));
}

// Answers what can be answered about a failed read; true when the caller
// should stop (the connection is being closed).
bool http_session::handle_read_error(beast::error_code ec) {
  if (!ec)
    return false;
  if (ec == http::error::end_of_stream || ec == net::error::eof) {
    do_close();
    return true;
  }
  if (ec == http::error::body_limit) {
    send(make(http::status::payload_too_large, app_json,
              proto::render_submit_reply(
                {}, false, "invalid: body larger than " + std::to_string(body_limit_) + " bytes")),
         true);
    return true;
  }
  if (ec == http::error::header_limit) {
    send(make(http::status::request_header_fields_too_large, text_plain,
              "request header fields too large\n"),
         true);
    return true;
  }
  if (ec.category() == http::make_error_code(http::error::end_of_stream).category()) {
    send(make(http::status::bad_request, text_plain, "bad request: " + ec.message() + "\n"), true);
    return true;
  }
  // Timeouts, resets, aborts: nothing to answer.
  log::debug(st_->api, "http read", ec.message());
  beast::error_code ignored;
  stream_.socket().shutdown(net::ip::tcp::socket::shutdown_both, ignored);
  stream_.close();
  return true;
}

void http_session::on_header(beast::error_code ec, std::size_t) {
  if (handle_read_error(ec))
    return;
  if (parser_->is_done())
    return handle();
  auto& h = parser_->get();
  // A registration of 1,000 keys is about 67 KB of JSON: more than a frame.
  // Every other body is held to a frame; beyond the limit the answer is 413,
  // never a half-read body.
  if (auto t = h.target(); t.substr(0, t.find('?')) != "/operator/listener/pubkeys") {
    body_limit_ = st_->limits.max_frame_bytes;
    parser_->body_limit(body_limit_);
    if (auto length = parser_->content_length(); length && *length > body_limit_)
      return handle_read_error(http::error::body_limit), void();
  }
  if (icontains(h[http::field::expect], "100-continue")) {
    static const std::string cont = "HTTP/1.1 100 Continue\r\n\r\n";
    net::async_write(stream_, net::buffer(cont),
                     beast::bind_front_handler(&http_session::on_continue_sent,
                                               shared_from_this()));
    return;
  }
  http::async_read(stream_, buffer_, *parser_,
                   beast::bind_front_handler(&http_session::on_body, shared_from_this()));
}

void http_session::on_continue_sent(beast::error_code ec, std::size_t) {
  if (ec)
    return handle_read_error(ec), void();
  http::async_read(stream_, buffer_, *parser_,
                   beast::bind_front_handler(&http_session::on_body, shared_from_this()));
}

void http_session::on_body(beast::error_code ec, std::size_t) {
  if (handle_read_error(ec))
    return;
  handle();
}

http_session::response http_session::make(http::status status, std::string content_type,
                                          std::string body) {
  response res{status, req_.version() ? req_.version() : 11};
  res.set(http::field::server, "waggle");
  if (!content_type.empty())
    res.set(http::field::content_type, content_type);
  res.set("X-Content-Type-Options", "nosniff");
  res.body() = std::move(body);
  return res;
}

void http_session::handle() {
  req_ = parser_->release();
  parser_.reset();
  stream_.expires_never();  // re-armed for the write and the next read

  auto target = std::string(req_.target());
  auto path = std::string_view(target).substr(0, target.find('?'));
  const bool upgrade = websocket::is_upgrade(req_);
  if (refuse_duplicate_host())
    return;
  if (!admit_request(path))
    return;
  if (handle_node_endpoint(path))
    return;
  // -- community endpoints: the Host picks the community ----------------------
  std::string host_header(req_[http::field::host]);
  auto community = community_of(host_header, upgrade);
  if (!community)
    return;
  if (community->blocks(remote_ip_))
    return send(make(http::status::forbidden, text_plain,
                     "blocked: this address may not use this community\n"),
                upgrade);
  // NIP-86 is served wherever the WebSocket is: the content type picks it.
  if (req_.method() == http::verb::post
      && icontains(req_[http::field::content_type], "application/nostr+json+rpc"))
    return handle_manage(*community, host_header);
  if (path == "/")
    return handle_root(*community, host_header, upgrade);
  if (path == "/events") {
    if (req_.method() == http::verb::options)
      return send_preflight();
    if (req_.method() != http::verb::post)
      return send(method_not_allowed(path, "POST, OPTIONS"));
    return handle_post_events(*community, host_header);
  }
  if (path == "/operator/listener/pubkeys") {
    if (req_.method() != http::verb::post && req_.method() != http::verb::get)
      return send(method_not_allowed(path, "GET, POST"));
    return handle_listener_registration(*community, host_header);
  }
  if (path == "/cluster") {
    if (req_.method() != http::verb::get)
      return send(method_not_allowed(path, "GET"));
    return handle_cluster(*community, host_header);
  }
  return send(make(http::status::not_found, text_plain, "not found: " + std::string(path) + "\n"),
              upgrade);
}

http_session::response http_session::method_not_allowed(std::string_view path, const char* allow) {
  auto res = make(http::status::method_not_allowed, text_plain,
                  "method " + std::string(req_.method_string()) + " not allowed on "
                    + std::string(path) + "\n");
  res.set(http::field::allow, allow);
  return res;
}

void http_session::send_preflight() {
  auto res = make(http::status::no_content, {}, {});
  add_cors(res);
  send(std::move(res));
}

// RFC 9112 §3.2: a request with more than one Host field is answered 400, on
// every path: two proxies (or a proxy and the node) could otherwise each act
// on a different one. True when it answered.
bool http_session::refuse_duplicate_host() {
  if (req_.count(http::field::host) < 2)
    return false;
  if (st_->api.watch)
    st_->api.watch->refused("duplicate_host");
  send(make(http::status::bad_request, text_plain, "bad request: more than one Host header\n"),
       true);
  return true;
}

// Node-level endpoints answer for any Host. True when `path` was one of them.
bool http_session::handle_node_endpoint(std::string_view path) {
  if (path != "/healthz" && path != "/metrics" && path != "/readyz")
    return false;
  if (req_.method() != http::verb::get) {
    send(method_not_allowed(path, "GET"));
    return true;
  }
  if (path == "/healthz") {
    send(make(http::status::ok, text_plain, "ok\n"));
  } else if (path == "/metrics") {
    // Node-wide (every community's counters): only the peers the operator
    // allowed, whatever the Host says.
    if (!metrics_allowed(st_->limits.metrics_allow, remote_ip_)) {
      if (st_->api.watch)
        st_->api.watch->refused("metrics_forbidden");
      send(make(http::status::forbidden, text_plain, "forbidden: /metrics is not served to "
                                                     "this address (--metrics-allow)\n"));
      return true;
    }
    std::string body = st_->api.watch ? st_->api.watch->metrics_text() : std::string{};
    body += st_->gauges_text();
    send(make(http::status::ok, "text/plain; version=0.0.4; charset=utf-8", std::move(body)));
  } else {
    // /readyz is node-level too: load balancers and orchestrators probe it
    // with whatever Host they use to reach the node (often an IP).
    send(readiness());
  }
  return true;
}

http_session::response http_session::readiness() {
  if (st_->draining())
    return make(http::status::service_unavailable, text_plain, "draining\n");
  // Saturated: a load balancer should send new clients elsewhere.
  if (auto why = st_->saturation())
    return make(http::status::service_unavailable, app_json,
                R"({"ready":false,"reason":")" + *why + R"("})");
  bool ready = false;
  try {
    ready = st_->api.ready && st_->api.ready();
  } catch (const std::exception& e) {
    log::warn(st_->api, "ready() threw", e.what());
  }
  if (!ready)
    return make(http::status::service_unavailable, text_plain, "not ready\n");
  return make(http::status::ok, text_plain, "ready\n");
}

// The community the Host names; answers (and returns nullopt) when there is
// none, or when the node is draining.
std::optional<community> http_session::community_of(const std::string& host_header,
                                                    bool upgrade) {
  if (host_header.empty()) {
    if (st_->api.watch)
      st_->api.watch->refused("host_missing");
    send(make(http::status::bad_request, text_plain, "missing Host header\n"), upgrade);
    return std::nullopt;
  }
  std::optional<community> found;
  try {
    found = st_->api.find_community(host_header);
  } catch (const std::exception& e) {
    log::warn(st_->api, "find_community threw", e.what());
  }
  if (!found) {
    if (st_->api.watch)
      st_->api.watch->refused("host_unknown");
    send(make(http::status::not_found, text_plain,
              "unknown community host: " + host_header + "\n"),
         upgrade);
    return std::nullopt;
  }
  if (st_->draining()) {
    send(make(http::status::service_unavailable, text_plain,
              "the relay is shutting down, retry shortly\n"),
         true);
    return std::nullopt;
  }
  return found;
}

// "/": the WebSocket upgrade, NIP-11, CORS preflight, or a hint for browsers.
void http_session::handle_root(const community& c, const std::string& host_header, bool upgrade) {
  if (upgrade)
    return upgrade_to_websocket(c, host_header);
  const auto method = req_.method();
  if (method == http::verb::options)
    return send_preflight();
  if (method != http::verb::get)
    return send(method_not_allowed("/", "GET, OPTIONS"));
  if (icontains(req_[http::field::accept], "application/nostr+json")) {
    std::string info;
    try {
      info = st_->api.relay_info(c);
    } catch (const std::exception& e) {
      log::warn(st_->api, "relay_info threw", e.what());
      return send(make(http::status::internal_server_error, text_plain, "internal error\n"));
    }
    auto res = make(http::status::ok, "application/nostr+json", std::move(info));
    res.set(http::field::vary, "Accept");
    add_cors(res);
    return send(std::move(res));
  }
  // A browser (or curl) without the NIP-11 Accept header: a friendly hint.
  auto res = make(http::status::ok, text_plain,
                  "waggle Nostr relay for " + c.name
                    + ": connect with a Nostr client over WebSocket.\n");
  res.set(http::field::vary, "Accept");
  send(std::move(res));
}

void http_session::upgrade_to_websocket(const community& c, const std::string& host_header) {
  if (!reserve_websocket())
    return;
  // Bytes read past the request: a client that did not wait for our 101
  // (RFC 6455 4.1 says it must). Beast accepts them only as raw bytes.
  std::string raw;
  if (buffer_.size() > 0) {
    std::ostringstream header;
    header << req_.base();
    raw = header.str() + beast::buffers_to_string(buffer_.data());
    if (raw.size() > ws_session::raw_accept_max) {
      st_->ws_count.fetch_sub(1);
      st_->unauth_count.fetch_sub(1);
      return send(make(http::status::bad_request, text_plain,
                       "WebSocket data sent before the handshake completed\n"),
                  true);
    }
  }
  // The socket, its slot and the ws_count reservation move to the session.
  auto ws = std::make_shared<ws_session>(std::move(stream_), st_, c, host_header,
                                         remote_ip_, std::move(slot_));
  if (raw.empty())
    ws->run(std::move(req_));
  else
    ws->run(std::move(raw));
}

uint64_t http_session::await_reply(std::function<void(http_session&)> on_timeout) {
  awaiting_reply_ = true;
  submit_timer_.expires_after(submit_timeout);
  // The pending wait keeps the session alive (inside the io_context) until the
  // reply or the timeout; `done` only holds it weakly, through the gate.
  submit_timer_.async_wait([self = shared_from_this(), on_timeout = std::move(on_timeout)](
                             beast::error_code ec) {
    if (ec || !self->awaiting_reply_)
      return;
    on_timeout(*self);
  });
  // A reply that arrives after the timeout must not answer a later request
  // on the same keep-alive connection: replies carry their request's number.
  return ++submit_seq_;
}

http_event_request http_session::request_in(const std::string& host) {
  return {std::string{req_[http::field::authorization]}, host, std::string{req_.target()},
          std::move(req_.body()), remote_ip_, std::string{req_.method_string()}};
}

void http_session::handle_post_events(const community& c, const std::string& host) {
  // Empty or not, unauthenticated or not: the node answers (NIP-98 and the
  // event are verified on scheduler threads, never here).
  const uint64_t seq = await_reply([](http_session& s) {
    s.on_event_reply({{}, false, "error: timed out waiting for the relay", 503});
  });
  auto done = answer_on_io<http_event_reply>(seq, &http_session::on_event_reply);
  try {
    st_->api.submit_event(c,
                          request_in(host), std::move(done));
  } catch (const std::exception& e) {
    log::warn(st_->api, "submit_event threw", e.what());
    on_event_reply({{}, false, "error: internal error", 503});
  }
}

void http_session::handle_manage(const community& c, const std::string& host) {
  static const std::string timed_out
    = R"({"result":null,"error":"error: timed out waiting for the relay"})";
  if (!st_->api.manage)
    return on_rpc_reply({404, R"({"result":null,"error":"invalid: NIP-86 is not served here"})"});
  const uint64_t seq = await_reply([](http_session& s) { s.on_rpc_reply({503, timed_out}); });
  auto done = answer_on_io<http_rpc_reply>(seq, &http_session::on_rpc_reply);
  try {
    st_->api.manage(c,
                    request_in(host), std::move(done));
  } catch (const std::exception& e) {
    log::warn(st_->api, "manage threw", e.what());
    on_rpc_reply({503, R"({"result":null,"error":"error: internal error"})"});
  }
}

void http_session::handle_listener_registration(const community& c, const std::string& host) {
  static const std::string timed_out = R"({"error":"error: timed out waiting for the relay"})";
  if (!st_->api.listener_registration)
    return send(make(http::status::not_found, app_json, R"({"error":"not found"})"));
  const uint64_t seq = await_reply([](http_session& s) { s.on_json_reply({503, timed_out}); });
  auto done = answer_on_io<http_rpc_reply>(seq, &http_session::on_json_reply);
  try {
    st_->api.listener_registration(c, request_in(host), std::move(done));
  } catch (const std::exception& e) {
    log::warn(st_->api, "listener_registration threw", e.what());
    on_json_reply({503, R"({"error":"error: internal error"})"});
  }
}

void http_session::handle_cluster(const community& c, const std::string& host) {
  static const std::string timed_out = R"({"error":"error: timed out waiting for the relay"})";
  if (!st_->api.cluster)
    return send(make(http::status::not_found, app_json, R"({"error":"not found"})"));
  const uint64_t seq = await_reply([](http_session& s) { s.on_json_reply({503, timed_out}); });
  auto done = answer_on_io<http_rpc_reply>(seq, &http_session::on_json_reply);
  try {
    st_->api.cluster(c, request_in(host), std::move(done));
  } catch (const std::exception& e) {
    log::warn(st_->api, "cluster threw", e.what());
    on_json_reply({503, R"({"error":"error: internal error"})"});
  }
}

void http_session::on_json_reply(http_rpc_reply reply) {
  awaiting_reply_ = false;
  submit_timer_.cancel();
  auto status = static_cast<http::status>(reply.http_status);
  auto res = make(status, app_json, std::move(reply.body));
  if (status == http::status::unauthorized) {
    if (st_->api.watch)
      st_->api.watch->refused("nip98");
    res.set(http::field::www_authenticate, "Nostr");
  }
  send(std::move(res));
}

void http_session::on_rpc_reply(http_rpc_reply reply) {
  awaiting_reply_ = false;
  submit_timer_.cancel();
  auto status = static_cast<http::status>(reply.http_status);
  auto res = make(status, "application/nostr+json+rpc", std::move(reply.body));
  add_cors(res);
  if (status == http::status::unauthorized) {
    if (st_->api.watch)
      st_->api.watch->refused("nip98");
    res.set(http::field::www_authenticate, "Nostr");
  }
  send(std::move(res));
}

void http_session::on_event_reply(http_event_reply reply) {
  awaiting_reply_ = false;
  submit_timer_.cancel();
  auto status = static_cast<http::status>(reply.http_status);
  auto res = make(status, app_json,
                  proto::render_submit_reply(reply.id, reply.accepted, reply.message));
  add_cors(res);
  if (status == http::status::unauthorized) {
    if (st_->api.watch)
      st_->api.watch->refused("nip98");
    res.set(http::field::www_authenticate, "Nostr");
  }
  send(std::move(res));
}

void http_session::send(response res, bool close) {
  res.keep_alive(!close && !close_after_ && req_.keep_alive());
  res.prepare_payload();
  res_ = std::make_shared<response>(std::move(res));
  stream_.expires_after(request_timeout);
  http::async_write(stream_, *res_,
                    beast::bind_front_handler(&http_session::on_write, shared_from_this(),
                                              !res_->keep_alive()));
}

void http_session::on_write(bool close, beast::error_code ec, std::size_t) {
  res_.reset();
  if (ec) {
    log::debug(st_->api, "http write", ec.message());
    return stream_.close();
  }
  if (close)
    return close_after_ || admission_ != admission::open ? close_now() : do_close();
  do_read();
}

void http_session::close_now() {
  // A refused or restricted connection: one request, read whole, one
  // answer. Lingering for what else the client might send would keep its
  // TCP slot (linger_timeout) for a client we turned away, and a stream of
  // them that stay open would fill the TCP cap and the health reserve and
  // turn away everyone else in turn.
  beast::error_code ec;
  auto& socket = stream_.socket();
  socket.shutdown(net::ip::tcp::socket::shutdown_send, ec);
  // Unread bytes would make close() reset the connection, which can destroy
  // the answer before the client has read it: take what has arrived (no
  // waiting for more; a reset then is the client's doing).
  drain_.resize(4096);
  for (std::size_t n = 0; !ec && n < linger_max_bytes && socket.available(ec) > 0;)
    n += socket.read_some(net::buffer(drain_), ec);
  stream_.close();
  slot_.reset();  // the slot now, whoever still holds the session
}

void http_session::do_close() {
  // Lingering close: stop sending, then read and discard what the client is
  // still sending (for a short while) so that closing does not reset the
  // connection before it has read our answer (e.g. a 413 with a body unread).
  beast::error_code ignored;
  stream_.socket().shutdown(net::ip::tcp::socket::shutdown_send, ignored);
  drain_.resize(4096);
  stream_.expires_after(linger_timeout);
  do_drain();
}

void http_session::do_drain() {
  stream_.async_read_some(
    net::buffer(drain_), [self = shared_from_this()](beast::error_code ec, std::size_t n) {
      self->drained_ += n;
      if (ec || self->drained_ > linger_max_bytes)
        return self->stream_.close();
      self->do_drain();
    });
}

}  // namespace waggle::gateway
