#include <boost/beast/core/string.hpp>

#include "gateway/ws_client.hpp"

#include <cctype>

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/websocket.hpp>

namespace waggle::gateway {

namespace beast = boost::beast;
namespace http = beast::http;
namespace websocket = beast::websocket;
namespace net = boost::asio;
using tcp = net::ip::tcp;

namespace {


// Completion state of one operation; handlers hold it by shared_ptr so a
// timed-out operation never writes into a dead stack frame.
struct op_state {
  bool done = false;
  beast::error_code ec;
};
using op_ptr = std::shared_ptr<op_state>;

// Runs the io_context until `done` or the timeout; false on timeout.
bool run_until(net::io_context& ioc, const bool& done, std::chrono::milliseconds timeout) {
  if (done)
    return true;
  ioc.restart();
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!done) {
    auto now = std::chrono::steady_clock::now();
    if (now >= deadline)
      return false;
    ioc.run_one_for(deadline - now);
    if (ioc.stopped())
      ioc.restart();
  }
  return true;
}

}  // namespace

std::string http_response::header(std::string_view name) const {
  for (auto& [k, v] : headers)
    if (boost::beast::iequals(k, name))
      return v;
  return {};
}

http_response http_request(const std::string& host, uint16_t port, const std::string& method,
                           const std::string& target, const header_list& headers,
                           const std::string& body, std::chrono::milliseconds timeout) {
  http_response out;
  net::io_context ioc;
  beast::tcp_stream stream{ioc};
  beast::error_code ec;
  auto step = [&](auto start) {
    ec = {};
    stream.expires_after(timeout);
    start();
    ioc.restart();
    ioc.run();
    return !ec;
  };

  tcp::resolver resolver{ioc};
  auto results = resolver.resolve(host, std::to_string(port), ec);
  if (ec) {
    out.error = "resolve: " + ec.message();
    return out;
  }
  if (!step([&] { stream.async_connect(results, [&](beast::error_code e, auto) { ec = e; }); })) {
    out.error = "connect: " + ec.message();
    return out;
  }

  http::request<http::string_body> req;
  req.method_string(method);
  req.target(target);
  req.version(11);
  req.set(http::field::host, host + ":" + std::to_string(port));
  req.set(http::field::user_agent, "waggle-ws-client");
  req.set(http::field::connection, "close");
  for (auto& [k, v] : headers)
    req.set(k, v);
  req.body() = body;
  if (!body.empty() || method == "POST" || method == "PUT")
    req.prepare_payload();

  if (!step([&] { http::async_write(stream, req, [&](beast::error_code e, size_t) { ec = e; }); })) {
    out.error = "write: " + ec.message();
    return out;
  }
  beast::flat_buffer buffer;
  http::response_parser<http::string_body> parser;
  parser.body_limit(64u << 20);
  if (!step([&] {
        http::async_read(stream, buffer, parser, [&](beast::error_code e, size_t) { ec = e; });
      })) {
    out.error = "read: " + ec.message();
    return out;
  }
  auto res = parser.release();
  out.status = res.result_int();
  out.body = std::move(res.body());
  for (auto& f : res)
    out.headers.emplace_back(std::string(f.name_string()), std::string(f.value()));
  beast::error_code ignored;
  stream.socket().shutdown(tcp::socket::shutdown_both, ignored);
  return out;
}

struct ws_client::impl {
  std::optional<net::io_context> ioc;
  std::optional<websocket::stream<beast::tcp_stream>> ws;
  beast::flat_buffer buffer;
  bool open = false;
  bool read_pending = false;
  bool read_done = false;
  beast::error_code read_ec;
  uint16_t close_code = 0;
  unsigned rejected = 0;
  std::string error;
  header_list extra_headers;

  void ended(beast::error_code ec) {
    if (!open)
      return;
    open = false;
    if (ws && ws->reason().code != websocket::close_code::none)
      close_code = static_cast<uint16_t>(ws->reason().code);
    if (error.empty() && ec)
      error = ec.message();
  }
};

ws_client::ws_client() : impl_(std::make_unique<impl>()) {}
ws_client::~ws_client() {
  if (impl_->open) {
    beast::error_code ignored;
    beast::get_lowest_layer(*impl_->ws).socket().close(ignored);
  }
}

void ws_client::set_headers(header_list headers) { impl_->extra_headers = std::move(headers); }

bool ws_client::connect(const std::string& host, uint16_t port, const std::string& host_header,
                        const std::string& target, std::chrono::milliseconds timeout) {
  auto& i = *impl_;
  if (i.ws && i.open) {
    beast::error_code ignored;
    beast::get_lowest_layer(*i.ws).socket().close(ignored);
  }
  // A fresh io_context: nothing pending from an earlier connection survives.
  i.ws.reset();
  i.ioc.emplace();
  i.ws.emplace(*i.ioc);
  i.buffer.clear();
  i.open = false;
  i.read_pending = false;
  i.read_done = false;
  i.close_code = 0;
  i.rejected = 0;
  i.error.clear();

  beast::error_code ec;
  tcp::resolver resolver{*i.ioc};
  auto results = resolver.resolve(host, std::to_string(port), ec);
  if (ec) {
    i.error = "resolve: " + ec.message();
    return false;
  }
  auto& tcp_layer = beast::get_lowest_layer(*i.ws);
  tcp_layer.expires_after(timeout);
  auto op = std::make_shared<op_state>();
  tcp_layer.async_connect(results, [op](beast::error_code e, auto) {
    op->ec = e;
    op->done = true;
  });
  if (!run_until(*i.ioc, op->done, timeout + std::chrono::seconds(1)) || op->ec) {
    i.error = "connect: " + (op->ec ? op->ec.message() : std::string("timeout"));
    tcp_layer.close();
    return false;
  }
  tcp_layer.expires_never();
  tcp_layer.socket().set_option(tcp::no_delay(true), ec);

  websocket::stream_base::timeout opt = websocket::stream_base::timeout::suggested(
    beast::role_type::client);
  opt.handshake_timeout = timeout;
  i.ws->set_option(opt);
  i.ws->read_message_max(64u << 20);
  if (!i.extra_headers.empty())
    i.ws->set_option(websocket::stream_base::decorator(
      [h = i.extra_headers](websocket::request_type& req) {
        for (auto& [k, v] : h)
          req.set(k, v);
      }));
  auto res = std::make_shared<websocket::response_type>();
  std::string hh = host_header.empty() ? host + ":" + std::to_string(port) : host_header;
  op = std::make_shared<op_state>();
  i.ws->async_handshake(*res, hh, target, [op, res](beast::error_code e) {
    op->ec = e;
    op->done = true;
  });
  if (!run_until(*i.ioc, op->done, timeout + std::chrono::seconds(1)) || op->ec) {
    if (op->ec == websocket::error::upgrade_declined)
      i.rejected = res->result_int();
    i.error = "handshake: " + (op->ec ? op->ec.message() : std::string("timeout"));
    tcp_layer.close();
    return false;
  }
  i.ws->text(true);
  i.open = true;
  return true;
}

bool ws_client::send_text(std::string_view text, std::chrono::milliseconds timeout) {
  auto& i = *impl_;
  if (!i.open)
    return false;
  auto op = std::make_shared<op_state>();
  auto data = std::make_shared<std::string>(text);
  i.ws->async_write(net::buffer(*data), [op, data](beast::error_code e, size_t) {
    op->ec = e;
    op->done = true;
  });
  if (!run_until(*i.ioc, op->done, timeout)) {
    // The write cannot be abandoned half-way: drop the connection.
    i.error = "write: timeout";
    beast::get_lowest_layer(*i.ws).close();
    i.ended({});
    return false;
  }
  if (op->ec) {
    i.ended(op->ec);
    return false;
  }
  return true;
}

std::optional<std::string> ws_client::read_text(std::chrono::milliseconds timeout) {
  auto& i = *impl_;
  if (!i.open && !i.read_pending)
    return std::nullopt;
  if (!i.read_pending) {
    i.read_pending = true;
    i.read_done = false;
    i.ws->async_read(i.buffer, [&i](beast::error_code e, size_t) {
      i.read_ec = e;
      i.read_done = true;
    });
  }
  if (!run_until(*i.ioc, i.read_done, timeout))
    return std::nullopt;
  i.read_pending = false;
  if (i.read_ec) {
    i.ended(i.read_ec);
    return std::nullopt;
  }
  std::string text = beast::buffers_to_string(i.buffer.data());
  i.buffer.consume(i.buffer.size());
  return text;
}

void ws_client::close(uint16_t code, std::chrono::milliseconds timeout) {
  auto& i = *impl_;
  if (!i.open)
    return;
  auto op = std::make_shared<op_state>();
  i.ws->async_close(websocket::close_reason(code), [op](beast::error_code) { op->done = true; });
  if (!run_until(*i.ioc, op->done, timeout)) {
    beast::get_lowest_layer(*i.ws).close();
    run_until(*i.ioc, op->done, std::chrono::seconds(1));
  }
  // Let a pending read observe the end.
  if (i.read_pending)
    run_until(*i.ioc, i.read_done, std::chrono::seconds(1));
  i.open = false;
  i.read_pending = false;
}

bool ws_client::is_open() const { return impl_->open; }
uint16_t ws_client::close_code() const { return impl_->close_code; }
unsigned ws_client::rejected_status() const { return impl_->rejected; }
const std::string& ws_client::error() const { return impl_->error; }

}  // namespace waggle::gateway
