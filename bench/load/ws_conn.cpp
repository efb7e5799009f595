#include "bench/load/ws_conn.hpp"

#include <charconv>

#include <boost/asio/dispatch.hpp>
#include <boost/beast/core/buffers_to_string.hpp>
#include <boost/beast/websocket.hpp>

namespace waggle::bench {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace websocket = beast::websocket;

std::optional<ws_target> parse_ws_url(const std::string& url) {
  constexpr std::string_view scheme = "ws://";
  if (url.rfind(scheme, 0) != 0)
    return std::nullopt;
  ws_target t;
  auto rest = url.substr(scheme.size());
  auto slash = rest.find('/');
  auto authority = rest.substr(0, slash);
  t.path = slash == std::string::npos ? "/" : rest.substr(slash);
  auto colon = authority.rfind(':');
  t.host = authority.substr(0, colon);
  t.port = 80;
  if (colon != std::string::npos) {
    auto digits = authority.substr(colon + 1);
    unsigned port = 0;
    auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), port);
    if (ec != std::errc{} || end != digits.data() + digits.size() || port == 0 || port > 65535)
      return std::nullopt;
    t.port = static_cast<uint16_t>(port);
  }
  if (t.host.empty())
    return std::nullopt;
  t.host_header = authority;
  return t;
}

ws_conn::ws_conn(net::io_context& ioc) : strand_(net::make_strand(ioc)), ws_(strand_) {}

void ws_conn::open(const ws_target& target, const net::ip::tcp::endpoint& endpoint,
                   status_fn opened) {
  auto self = shared_from_this();
  auto& tcp = beast::get_lowest_layer(ws_);
  tcp.expires_after(std::chrono::seconds(30));
  tcp.async_connect(endpoint, [self, target, opened](beast::error_code ec) {
    if (ec)
      return opened("connect: " + ec.message());
    auto& tcp = beast::get_lowest_layer(self->ws_);
    tcp.expires_never();
    beast::error_code ignored;
    tcp.socket().set_option(net::ip::tcp::no_delay(true), ignored);
    auto opt = websocket::stream_base::timeout::suggested(beast::role_type::client);
    opt.handshake_timeout = std::chrono::seconds(30);
    self->ws_.set_option(opt);
    self->ws_.read_message_max(64u << 20);
    self->ws_.async_handshake(target.host_header, target.path,
                              [self, opened](beast::error_code ec) {
                                if (ec)
                                  return opened("handshake: " + ec.message());
                                self->ws_.text(true);
                                self->open_ = true;
                                opened("");
                                self->read();
                              });
  });
}

void ws_conn::read() {
  ws_.async_read(buffer_, [self = shared_from_this()](beast::error_code ec, size_t) {
    if (ec)
      return self->ended(ec == websocket::error::closed && self->closing_ ? "" : ec.message());
    auto data = self->buffer_.cdata();
    std::string_view text{static_cast<const char*>(data.data()), data.size()};
    if (self->on_message_)
      self->on_message_(text);
    self->buffer_.consume(self->buffer_.size());
    self->read();
  });
}

void ws_conn::send(std::string frame) {
  // Callers may be on another strand (the coordinator); hop onto ours.
  net::dispatch(strand_, [self = shared_from_this(), frame = std::move(frame)]() mutable {
    if (!self->open_ || self->closing_)
      return;
    self->outbox_.push_back(std::move(frame));
    if (!self->writing_)
      self->write_next();
  });
}

void ws_conn::write_next() {
  if (outbox_.empty()) {
    writing_ = false;
    return;
  }
  writing_ = true;
  ws_.async_write(net::buffer(outbox_.front()),
                  [self = shared_from_this()](beast::error_code ec, size_t) {
                    if (ec)
                      return self->ended("write: " + ec.message());
                    self->outbox_.pop_front();
                    self->write_next();
                  });
}

void ws_conn::close() {
  net::dispatch(strand_, [self = shared_from_this()] {
    if (!self->open_ || self->closing_)
      return;
    self->closing_ = true;
    self->ws_.async_close(websocket::close_code::normal, [self](beast::error_code) {});
  });
}

void ws_conn::ended(const std::string& error) {
  if (ended_)
    return;
  ended_ = true;
  bool was_open = open_;
  open_ = false;
  if (was_open && on_closed_)
    on_closed_(closing_ ? "" : error);
}

}  // namespace waggle::bench
