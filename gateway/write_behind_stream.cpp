#include "gateway/write_behind_stream.hpp"

namespace waggle::gateway {

namespace net = boost::asio;
namespace beast = boost::beast;

bool write_behind_stream::append_text_frame(std::string_view a, std::string_view b,
                                            std::string_view c) {
  if (failed_ || sealed_)
    return false;
  const std::uint64_t len = a.size() + b.size() + c.size();
  // RFC 6455 5.2: FIN + text opcode, then the length in 7, 16 or 64 bits;
  // a server's frames are not masked.
  char head[10];
  std::size_t h = 0;
  head[h++] = static_cast<char>(0x81);
  if (len < 126) {
    head[h++] = static_cast<char>(len);
  } else if (len <= 0xFFFF) {
    head[h++] = 126;
    head[h++] = static_cast<char>((len >> 8) & 0xFF);
    head[h++] = static_cast<char>(len & 0xFF);
  } else {
    head[h++] = 127;
    for (int shift = 56; shift >= 0; shift -= 8)
      head[h++] = static_cast<char>((len >> shift) & 0xFF);
  }
  pending_.reserve(pending_.size() + h + len);
  pending_.append(head, h);
  pending_.append(a);
  pending_.append(b);
  pending_.append(c);
  return true;
}

void write_behind_stream::when_written(std::function<void(beast::error_code)> done) {
  // Every byte appended so far, Beast's and the session's, is either in
  // flight or pending.
  waiter_at_ = written_ + inflight_.size() + pending_.size();
  if (failed_ || waiter_at_ == written_) {
    auto ec = failed_;
    return net::post(get_executor(), [done = std::move(done), ec] { done(ec); });
  }
  waiter_ = std::move(done);
  flush();
}

void write_behind_stream::flush() {
  if (writing_ || pending_.empty() || failed_)
    return;
  auto owner = owner_.lock();
  if (!owner) {
    // The session is gone: nobody reads these bytes. Failing them releases
    // Beast's parked handlers, which hold the stream (and this layer) alive.
    failed_ = net::error::operation_aborted;
    pending_.clear();
    return release_parked();
  }
  inflight_.clear();
  inflight_.swap(pending_);
  writing_ = true;
  net::async_write(next_.socket(), net::buffer(inflight_),
                   [this, owner = std::move(owner)](beast::error_code ec, std::size_t n) {
                     on_flushed(ec, n);
                   });
}

void write_behind_stream::on_flushed(beast::error_code ec, std::size_t n) {
  writing_ = false;
  written_ += n;
  inflight_.clear();
  if (ec) {
    failed_ = ec;
    pending_.clear();
  }
  release_parked();
  if (waiter_ && (failed_ || written_ >= waiter_at_)) {
    auto done = std::move(waiter_);
    waiter_ = nullptr;
    done(failed_);
  }
  if (!ec)
    flush();
}

void write_behind_stream::release_parked() {
  while (!parked_.empty() && (failed_ || parked_.front().at <= written_)) {
    auto p = std::move(parked_.front());
    parked_.pop_front();
    *p.result = failed_;
    p.timer->cancel();  // its wait completes (posted) with the result set above
  }
}

void teardown(beast::role_type role, write_behind_stream& s, beast::error_code& ec) {
  // Only an asynchronous close is ever used; a synchronous one would block
  // the strand. Whatever is still pending is dropped with the connection.
  beast::websocket::teardown(role, s.next_.socket(), ec);
}

}  // namespace waggle::gateway
