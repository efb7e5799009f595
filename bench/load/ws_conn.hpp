#pragma once

// One asynchronous WebSocket client connection of the load tool. Every
// callback runs on the connection's strand, so a role object that keeps its
// timers on executor() needs no locks.
//
// The framing is the tool's own (RFC 6455, client side), not Beast's stream:
// at 1,000 subscribers the tool receives 100,000 frames a second on the same
// two cores as the relay it measures, and Beast's composed read (one
// operation, its buffers and its strand hops per message) cost about as much
// as the system call under it. Here one read takes every frame the kernel
// has, and one write carries every queued frame (one write in flight).

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>

namespace waggle::bench {

struct ws_target {
  std::string host;         // address to connect to
  uint16_t port = 0;
  std::string host_header;  // Host: chooses the community
  std::string path = "/";
};

// Parses ws://host[:port][/path]; nullopt if it is not one.
std::optional<ws_target> parse_ws_url(const std::string& url);

// The frame decoder, apart from the socket so it can be tested on bytes.
// Server frames are never masked; a masked one, a reserved bit, an unknown
// opcode or a message over the limit is a protocol error.
class ws_frame_reader {
 public:
  enum class kind { text, ping, close, error };
  struct frame {
    kind what;
    std::string_view payload;  // valid until the next call
  };
  explicit ws_frame_reader(size_t max_message) : max_message_(max_message) {}
  // Where the next bytes go, at least `want` of them.
  char* space(size_t want);
  size_t space_size() const { return buf_.size() - filled_; }
  void filled(size_t n) { filled_ += n; }
  // The next whole frame, or nullopt until more bytes arrive. Fragments of
  // a message are joined; pongs and binary messages are skipped.
  std::optional<frame> next();
  // Bytes taken so far are released; call after handling every frame.
  void compact();
  const std::string& error() const { return error_; }

 private:
  std::vector<char> buf_ = std::vector<char>(64 * 1024);
  size_t filled_ = 0;
  size_t start_ = 0;
  size_t need_ = 0;  // where the incomplete frame at start_ ends
  size_t max_message_;
  std::string fragments_;
  bool in_fragments_ = false;
  bool fragments_text_ = false;
  std::string error_;
};

// A client frame (masked, as RFC 6455 requires of clients).
std::string ws_client_frame(uint8_t opcode, std::string_view payload, uint32_t mask_key);

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

  // Connects and upgrades (30 s for both); then reads until the end.
  void open(const ws_target& target, const boost::asio::ip::tcp::endpoint& endpoint,
            status_fn opened);
  void send(std::string frame);
  void close();
  bool is_open() const { return open_; }

 private:
  void read_upgrade(status_fn opened);
  void read_frames();
  void queue_frame(uint8_t opcode, std::string_view payload);
  void write_next();
  void ended(const std::string& error);

  strand strand_;
  boost::asio::ip::tcp::socket socket_;
  boost::asio::steady_timer deadline_;
  std::string upgrade_;  // the handshake's answer as it arrives
  ws_frame_reader reader_{64u << 20};
  std::vector<std::string> outbox_;   // encoded frames waiting for the write in flight
  std::vector<std::string> writing_;  // encoded frames of the write in flight
  uint32_t mask_state_;
  bool open_ = false;
  bool closing_ = false;
  bool ended_ = false;
  message_fn on_message_;
  status_fn on_closed_;
};

}  // namespace waggle::bench
