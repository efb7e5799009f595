#pragma once

// The write side of a WebSocket connection, owned in one place.
//
// Beast's websocket stream writes one message per async_write, through a
// composed operation that costs more than the system call it makes, and it
// writes its own frames (the handshake answer, pongs, keep-alive pings, the
// close) whenever its read loop decides to. A session that frames its own
// text messages and writes many of them with one `sendmsg` must not let those
// two writers interleave on the socket: a pong landing inside a half-written
// frame corrupts the stream.
//
// This layer sits between the websocket stream and the TCP stream and is the
// only writer of the socket. Beast's writes are appended whole to the
// outgoing bytes; the session appends framed messages the same way
// (`append_text_frame`), and exactly one socket write is in flight at a time,
// carrying everything appended since the last one began. Bytes leave in the
// order they were appended, so every frame stays whole.
//
// Every writer waits for the kernel: a Beast write completes only when its
// bytes have been taken (Beast holds its write lock until then, so its read
// loop answers the next ping only after the last pong left, and a client
// that pings without reading meets TCP's push-back, not a growing buffer),
// and the session appends its next batch only after the last one was
// written (`when_written`). So the layer holds at most one batch of the
// session's and one control frame of Beast's.
//
// Beast's waiting handlers (rare: the upgrade answer, pongs, pings, the
// close) are parked in timer waits, not in the layer: the io context owns
// them, so a stopped server (io_context reset) destroys them, and a handler
// holding the session never keeps it alive from inside it. The session's
// own waiter, one per batch, is a plain callback that holds the session
// weakly (a timer per batch cost more than the write it waited for).

#include <cstddef>
#include <deque>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include <boost/asio/buffer.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/bind_handler.hpp>
#include <boost/beast/core/error.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/websocket/teardown.hpp>

namespace waggle::gateway {

class write_behind_stream {
 public:
  using executor_type = boost::beast::tcp_stream::executor_type;
  using next_layer_type = boost::beast::tcp_stream;

  explicit write_behind_stream(boost::beast::tcp_stream&& next) : next_(std::move(next)) {}

  executor_type get_executor() noexcept { return next_.get_executor(); }
  next_layer_type& next_layer() noexcept { return next_; }
  const next_layer_type& next_layer() const noexcept { return next_; }

  // Whoever must outlive a socket write in flight (the session): each write
  // holds it until its handler has run.
  void set_owner(std::weak_ptr<void> owner) { owner_ = std::move(owner); }

  template <class MutableBufferSequence, class ReadHandler>
  auto async_read_some(const MutableBufferSequence& buffers, ReadHandler&& handler) {
    return next_.async_read_some(buffers, std::forward<ReadHandler>(handler));
  }

  // Beast's writes: appended whole; complete once the kernel has taken them
  // (or with the write's error).
  template <class ConstBufferSequence, class WriteHandler>
  auto async_write_some(const ConstBufferSequence& buffers, WriteHandler&& handler) {
    return boost::asio::async_initiate<WriteHandler, void(boost::beast::error_code, std::size_t)>(
      [this](auto h, const ConstBufferSequence& b) {
        const std::size_t n = boost::asio::buffer_size(b);
        if (failed_ || sealed_) {
          // After the close frame the socket takes nothing more: dropped,
          // reported written (the peer is closing anyway).
          auto ec = failed_;
          return boost::asio::post(get_executor(),
                                   boost::beast::bind_front_handler(std::move(h), ec, failed_ ? 0 : n));
        }
        bool first = true;
        for (auto it = boost::asio::buffer_sequence_begin(b);
             it != boost::asio::buffer_sequence_end(b); ++it) {
          boost::asio::const_buffer piece = *it;
          if (first && piece.size() > 0) {
            first = false;
            if (is_close_frame(piece))
              sealed_ = true;  // nothing of the session's may follow Beast's close
          }
          pending_.append(static_cast<const char*>(piece.data()), piece.size());
        }
        park(written_ + inflight_.size() + pending_.size(),
             [h = std::move(h), n](boost::beast::error_code ec) mutable {
               std::move(h)(ec, ec ? 0 : n);
             });
        flush();
      },
      handler, buffers);
  }

  // A whole text message (unmasked, server to client) from its parts, framed
  // here. False once Beast has written its close frame, or after an error.
  bool append_text_frame(std::string_view a, std::string_view b, std::string_view c);
  // Runs `done` (on the strand) once every byte appended so far has reached the
  // socket, or with the error that stopped it (after which every write fails
  // at once with it). One waiter at a time; it must not hold the layer's
  // owner (it is kept inside it): the write in flight does.
  void when_written(std::function<void(boost::beast::error_code)> done);
  bool sealed() const { return sealed_; }

 private:
  static bool is_close_frame(boost::asio::const_buffer first) {
    return static_cast<const unsigned char*>(first.data())[0] == 0x88;  // FIN + opcode close
  }
  void flush();
  void on_flushed(boost::beast::error_code ec, std::size_t n);
  // Parks `done` until written_ reaches `at` (or a write fails): a timer
  // wait the io context owns, cancelled to release it. `done` gets no error
  // once its bytes were taken, the write's error if one failed, and
  // operation_aborted if the layer went away first.
  template <class Done>
  void park(std::uint64_t at, Done&& done);
  void release_parked();

  struct parked {
    std::uint64_t at = 0;
    std::unique_ptr<boost::asio::steady_timer> timer;
    std::shared_ptr<boost::beast::error_code> result;
  };

  boost::beast::tcp_stream next_;
  std::weak_ptr<void> owner_;
  std::string pending_;   // appended while a write is in flight
  std::string inflight_;  // the bytes of the write in flight
  bool writing_ = false;
  bool sealed_ = false;
  boost::beast::error_code failed_;
  std::uint64_t written_ = 0;  // bytes the kernel took since the start
  std::deque<parked> parked_;  // in the order of `at`
  std::uint64_t waiter_at_ = 0;
  std::function<void(boost::beast::error_code)> waiter_;

  template <class Handler>
  friend void async_teardown(boost::beast::role_type role, write_behind_stream& s, Handler&& h);
  friend void teardown(boost::beast::role_type role, write_behind_stream& s,
                       boost::beast::error_code& ec);
};

// The close handshake's last step: what was appended (the close frame among
// it) goes out first, then the TCP teardown of the layer below.
template <class Handler>
void async_teardown(boost::beast::role_type role, write_behind_stream& s, Handler&& h) {
  auto* socket = &s.next_.socket();
  s.park(s.written_ + s.inflight_.size() + s.pending_.size(),
         [role, socket, h = std::forward<Handler>(h)](boost::beast::error_code ec) mutable {
           if (ec)
             return std::move(h)(ec);
           boost::beast::websocket::async_teardown(role, *socket, std::move(h));
         });
}

template <class Done>
void write_behind_stream::park(std::uint64_t at, Done&& done) {
  auto result = std::make_shared<boost::beast::error_code>(boost::asio::error::operation_aborted);
  if (failed_ || at <= written_) {
    *result = failed_;
    return boost::asio::post(get_executor(), [d = std::forward<Done>(done), result]() mutable {
      std::move(d)(*result);
    });
  }
  auto timer = std::make_unique<boost::asio::steady_timer>(get_executor());
  timer->expires_at(boost::asio::steady_timer::time_point::max());
  timer->async_wait([d = std::forward<Done>(done), result](boost::beast::error_code) mutable {
    std::move(d)(*result);
  });
  parked_.push_back({at, std::move(timer), std::move(result)});
}

void teardown(boost::beast::role_type role, write_behind_stream& s, boost::beast::error_code& ec);

}  // namespace waggle::gateway
