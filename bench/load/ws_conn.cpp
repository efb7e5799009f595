#include "bench/load/ws_conn.hpp"

#include <algorithm>
#include <array>
#include <charconv>
#include <chrono>
#include <cstring>

#include <boost/asio/dispatch.hpp>
#include <boost/asio/write.hpp>

namespace waggle::bench {

namespace net = boost::asio;

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

// --- frames ------------------------------------------------------------------------

char* ws_frame_reader::space(size_t want) {
  compact();
  auto needed = std::max(filled_ + want, need_);
  if (buf_.size() < needed)
    buf_.resize(needed);
  return buf_.data() + filled_;
}

void ws_frame_reader::compact() {
  if (start_ == 0)
    return;
  std::memmove(buf_.data(), buf_.data() + start_, filled_ - start_);
  filled_ -= start_;
  need_ = need_ > start_ ? need_ - start_ : 0;
  start_ = 0;
}

std::optional<ws_frame_reader::frame> ws_frame_reader::next() {
  auto fail = [this](const char* why) {
    if (error_.empty())
      error_ = why;
    return frame{kind::error, error_};
  };
  if (!error_.empty())
    return frame{kind::error, error_};
  for (;;) {
    auto avail = filled_ - start_;
    if (avail < 2)
      return std::nullopt;
    auto* p = reinterpret_cast<const unsigned char*>(buf_.data() + start_);
    bool fin = (p[0] & 0x80) != 0;
    unsigned opcode = p[0] & 0x0f;
    uint64_t len = p[1] & 0x7f;
    size_t head = 2;
    if (len == 126) {
      if (avail < 4)
        return std::nullopt;
      len = (uint64_t{p[2]} << 8) | p[3];
      head = 4;
    } else if (len == 127) {
      if (avail < 10)
        return std::nullopt;
      len = 0;
      for (int i = 0; i < 8; ++i)
        len = (len << 8) | p[2 + i];
      head = 10;
    }
    if ((p[0] & 0x70) != 0)
      return fail("a reserved bit is set");
    if ((p[1] & 0x80) != 0)
      return fail("the relay masked a frame");
    if (len > max_message_ || fragments_.size() + len > max_message_)
      return fail("message over the limit");
    if (avail < head + len) {
      need_ = start_ + head + static_cast<size_t>(len);
      return std::nullopt;
    }
    std::string_view payload{buf_.data() + start_ + head, static_cast<size_t>(len)};
    start_ += head + static_cast<size_t>(len);
    need_ = 0;
    switch (opcode) {
      case 0x0:  // continuation
        if (!in_fragments_)
          return fail("a continuation without a message");
        fragments_.append(payload);
        if (!fin)
          continue;
        in_fragments_ = false;
        if (fragments_text_)
          return frame{kind::text, fragments_};
        continue;
      case 0x1:
      case 0x2:
        if (in_fragments_)
          return fail("a new message inside a fragmented one");
        if (fin) {
          if (opcode == 0x1)
            return frame{kind::text, payload};
          continue;  // binary: the relay sends none
        }
        fragments_.assign(payload);
        in_fragments_ = true;
        fragments_text_ = opcode == 0x1;
        continue;
      case 0x8:
        return frame{kind::close, payload};
      case 0x9:
        return frame{kind::ping, payload};
      case 0xA:
        continue;
      default:
        return fail("an unknown opcode");
    }
  }
}

std::string ws_client_frame(uint8_t opcode, std::string_view payload, uint32_t mask_key) {
  std::string out;
  out.reserve(payload.size() + 14);
  out.push_back(static_cast<char>(0x80 | opcode));
  auto n = payload.size();
  if (n < 126) {
    out.push_back(static_cast<char>(0x80 | n));
  } else if (n <= 0xffff) {
    out.push_back(static_cast<char>(0x80 | 126));
    out.push_back(static_cast<char>(n >> 8));
    out.push_back(static_cast<char>(n & 0xff));
  } else {
    out.push_back(static_cast<char>(0x80 | 127));
    for (int i = 7; i >= 0; --i)
      out.push_back(static_cast<char>((static_cast<uint64_t>(n) >> (8 * i)) & 0xff));
  }
  char mask[4];
  std::memcpy(mask, &mask_key, 4);
  out.append(mask, 4);
  auto at = out.size();
  out.append(payload);
  for (size_t i = 0; i < n; ++i)
    out[at + i] = static_cast<char>(out[at + i] ^ mask[i & 3]);
  return out;
}

// --- the connection ----------------------------------------------------------------

ws_conn::ws_conn(net::io_context& ioc)
  : strand_(net::make_strand(ioc)),
    socket_(strand_),
    deadline_(strand_),
    mask_state_((static_cast<uint32_t>(reinterpret_cast<uintptr_t>(this) >> 4)
                 ^ static_cast<uint32_t>(
                   std::chrono::steady_clock::now().time_since_epoch().count()))
                | 1u) {}

void ws_conn::open(const ws_target& target, const net::ip::tcp::endpoint& endpoint,
                   status_fn opened) {
  auto self = shared_from_this();
  deadline_.expires_after(std::chrono::seconds(30));
  deadline_.async_wait([self](boost::system::error_code ec) {
    if (!ec && !self->open_) {
      boost::system::error_code ignored;
      self->socket_.close(ignored);
    }
  });
  socket_.async_connect(endpoint, [self, target, opened](boost::system::error_code ec) {
    if (ec)
      return opened("connect: " + ec.message());
    boost::system::error_code ignored;
    self->socket_.set_option(net::ip::tcp::no_delay(true), ignored);
    // The key is fixed: the tool trusts the relay it measures, and the relay
    // checks only that the key is there and well formed.
    auto request = std::make_shared<std::string>(
      "GET " + target.path + " HTTP/1.1\r\nHost: " + target.host_header
      + "\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
        "Sec-WebSocket-Key: d2FnZ2xlLWxvYWQtdG9vbA==\r\nSec-WebSocket-Version: 13\r\n\r\n");
    net::async_write(self->socket_, net::buffer(*request),
                     [self, request, opened](boost::system::error_code ec, size_t) {
                       if (ec)
                         return opened("handshake: " + ec.message());
                       self->read_upgrade(opened);
                     });
  });
}

void ws_conn::read_upgrade(status_fn opened) {
  auto chunk = std::make_shared<std::array<char, 4096>>();
  socket_.async_read_some(
    net::buffer(*chunk), [self = shared_from_this(), chunk, opened](boost::system::error_code ec,
                                                                     size_t n) {
      if (ec)
        return opened("handshake: " + ec.message());
      self->upgrade_.append(chunk->data(), n);
      auto end = self->upgrade_.find("\r\n\r\n");
      if (end == std::string::npos) {
        if (self->upgrade_.size() > 16 * 1024)
          return opened("handshake: answer too long");
        return self->read_upgrade(opened);
      }
      auto status = std::string_view{self->upgrade_}.substr(0, self->upgrade_.find("\r\n"));
      if (status.rfind("HTTP/1.1 101", 0) != 0)
        return opened("handshake: " + std::string{status});
      // What follows the answer is already the relay's first frames (its AUTH challenge).
      auto rest = std::string_view{self->upgrade_}.substr(end + 4);
      std::memcpy(self->reader_.space(rest.size()), rest.data(), rest.size());
      self->reader_.filled(rest.size());
      self->upgrade_.clear();
      self->upgrade_.shrink_to_fit();
      self->deadline_.cancel();
      self->open_ = true;
      opened("");
      self->read_frames();
    });
}

void ws_conn::read_frames() {
  // Every whole frame already here, then the next read.
  while (!ended_) {
    auto f = reader_.next();
    if (!f)
      break;
    switch (f->what) {
      case ws_frame_reader::kind::text:
        if (on_message_)
          on_message_(f->payload);
        break;
      case ws_frame_reader::kind::ping:
        queue_frame(0xA, f->payload);
        break;
      case ws_frame_reader::kind::close:
        return ended(closing_ ? "" : "closed by the relay");
      case ws_frame_reader::kind::error:
        return ended("protocol: " + reader_.error());
    }
  }
  if (ended_)
    return;
  auto* at = reader_.space(16 * 1024);
  socket_.async_read_some(net::buffer(at, reader_.space_size()),
                          [self = shared_from_this()](boost::system::error_code ec, size_t n) {
                            if (ec)
                              return self->ended(self->closing_ ? "" : ec.message());
                            self->reader_.filled(n);
                            self->read_frames();
                          });
}

void ws_conn::send(std::string frame) {
  // Callers may be on another strand (the coordinator); hop onto ours.
  net::dispatch(strand_, [self = shared_from_this(), frame = std::move(frame)]() mutable {
    if (!self->open_ || self->closing_)
      return;
    self->queue_frame(0x1, frame);
  });
}

void ws_conn::queue_frame(uint8_t opcode, std::string_view payload) {
  if (ended_)
    return;
  mask_state_ ^= mask_state_ << 13;
  mask_state_ ^= mask_state_ >> 17;
  mask_state_ ^= mask_state_ << 5;
  outbox_.push_back(ws_client_frame(opcode, payload, mask_state_));
  if (writing_.empty())
    write_next();
}

void ws_conn::write_next() {
  if (outbox_.empty() || ended_)
    return;
  writing_.swap(outbox_);
  std::vector<net::const_buffer> buffers;
  buffers.reserve(writing_.size());
  for (auto& f : writing_)
    buffers.emplace_back(net::buffer(f));
  net::async_write(socket_, buffers,
                   [self = shared_from_this()](boost::system::error_code ec, size_t) {
                     self->writing_.clear();
                     if (ec)
                       return self->ended("write: " + ec.message());
                     self->write_next();
                   });
}

void ws_conn::close() {
  net::dispatch(strand_, [self = shared_from_this()] {
    if (!self->open_ || self->closing_)
      return;
    self->closing_ = true;
    self->queue_frame(0x8, std::string_view{"\x03\xe8", 2});  // 1000, normal closure
    // The relay answers with its close frame; if it does not, stop waiting.
    self->deadline_.expires_after(std::chrono::seconds(5));
    self->deadline_.async_wait([self](boost::system::error_code ec) {
      if (!ec)
        self->ended("");
    });
  });
}

void ws_conn::ended(const std::string& error) {
  if (ended_)
    return;
  ended_ = true;
  deadline_.cancel();
  boost::system::error_code ignored;
  socket_.close(ignored);
  bool was_open = open_;
  open_ = false;
  if (was_open && on_closed_)
    on_closed_(closing_ ? "" : error);
}

}  // namespace waggle::bench
