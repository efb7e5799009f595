#pragma once

// One WebSocket: reads frames and forwards them to the connection actor;
// writes what the actor sends through its socket_sink, one write in flight,
// with a bounded outbound queue (a slow consumer is dropped with a NOTICE and
// close 1008). All state is touched only on the socket's strand.

#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/websocket.hpp>

#include "gateway/server_state.hpp"
#include "gateway/write_behind_stream.hpp"

namespace waggle::gateway {

// Frames the session forwarded to its connection actor that the actor has not
// handled yet: raised by the session on its strand, lowered by the sink from
// the actor's thread (socket_sink::frame_handled). Shared by both, so the
// sink needs no post per frame (ws_session.cpp, forward(), says why no
// wake-up is lost).
struct frame_credit_count {
  std::atomic<std::size_t> outstanding{0};
};

class ws_session;

// What the connection actor's sink hands its session, in call order: frames,
// and the calls that must keep their place among them (close,
// notify_drained). The sink appends under the mutex and posts a drain onto
// the session's strand only when none is pending (`rung`), so a burst of
// frames costs one handler, not one per frame; the drain takes them all.
struct session_inbox {
  struct item {
    out_frame frame;
    std::function<void(ws_session&)> call;  // set: a call, not a frame
  };
  std::mutex mtx;
  std::vector<item> items;
  bool rung = false;  // a drain is posted and has not taken the items yet
  bool dead = false;  // the session finished: pushes are dropped
};

class ws_session : public std::enable_shared_from_this<ws_session> {
 public:
  // The caller has already reserved a slot in st->ws_count; the session
  // releases it when destroyed.
  ws_session(boost::beast::tcp_stream&& stream, std::shared_ptr<server_state> st,
             community community, std::string host, std::string remote_ip,
             std::unique_ptr<tcp_slot> slot);
  ~ws_session();

  // Accepts the upgrade request (already read by the http_session).
  void run(boost::beast::http::request<boost::beast::http::string_body> req);
  // Same, for a client that sent frames right behind its upgrade request:
  // `raw` is the request's header followed by those bytes (at most
  // raw_accept_max bytes: Beast's read buffer must hold all of it).
  void run(std::string raw);
  // (Beast 1.81's read buffer is a static_buffer of its private tcp_frame_size, 1536.)
  static constexpr std::size_t raw_accept_max = 1536;

  // Strand only (the socket_sink posts them through the server's gate).
  // Queues one frame; starts writing unless `start` is false (the caller
  // starts the write once it has queued a whole inbox).
  void enqueue(out_frame frame, bool start = true);
  // The sink's doorbell: queues (or runs) everything in the inbox, in order.
  void take_inbox();
  void begin_close(uint16_t code, std::string reason);
  // socket_sink::notify_drained, on the strand: one waiter at a time.
  void notify_drained(std::function<void(socket_sink::room)> done, std::size_t at_most_bytes);
  // The connection's first AUTH succeeded: no deadline, no longer counted
  // as unauthenticated.
  void mark_authenticated();
  // socket_sink::pause_reading, on the strand: the next read waits until then.
  void pause_reading(std::chrono::milliseconds how_long);
  // Posted by the sink when the actor's frame_handled() brought the
  // outstanding frames down from frame_credit: reading may go on.
  void credit_returned();
  // Strand only: the unauthenticated cap is full and this is its oldest
  // socket; it makes room for a newcomer (ws_session_limits.cpp).
  void evict_unauthenticated();
  // Dropped for the node-wide outbound budget (another session found this
  // one's queue the biggest).
  void shed();
  boost::beast::tcp_stream::executor_type executor() { return ws_.get_executor(); }

  // Seconds granted to flush queued frames and complete a close handshake
  // before the TCP connection is simply closed.
  static constexpr std::chrono::seconds close_grace{5};
  // Frames forwarded to the connection actor and not yet handled, at most;
  // at the limit the session stops reading (TCP pushes back on the client)
  // until the actor has handled one. Frames are at most max_frame_bytes, so
  // this bounds the mailbox's bytes too.
  static constexpr std::size_t frame_credit = 16;
  // A backlog is written in batches of about this many bytes (at least one
  // frame): one system call for many frames, while the queue's caps still
  // count what the kernel has not taken.
  static constexpr std::size_t write_batch_bytes = 64 * 1024;
  // While reading is paused or out of credit, how often the socket is looked
  // at for the peer's FIN or reset (no read is pending to see them).
  static constexpr std::chrono::milliseconds peer_watch_interval{500};
  std::size_t queued_bytes() const { return queued_shared_.load(); }

 private:
  void configure();
  void on_accept(boost::beast::error_code ec);
  void do_read();
  // The next read: at once, when a pause asked for by the actor ends, or
  // when the actor has handled enough frames to give credit back.
  void read_next();
  // Sends one frame to the actor, counting it against frame_credit.
  void forward(std::string frame);
  void on_read(boost::beast::error_code ec, std::size_t bytes);
  void drop_slow_consumer();
  bool below_low_water() const;
  void fire_drained_if_low();
  // ws_session_limits.cpp: the AUTH deadline, the write-stall watch and the
  // node-wide outbound budget.
  void arm_auth_deadline();
  // While no read is pending (paused, out of credit): polls the socket every
  // peer_watch_interval and ends the session when the peer has gone.
  void watch_peer();
  void on_peer_watch();
  void on_auth_deadline();
  void watch_writes();
  void on_stall_check();
  void add_queued(std::size_t n);
  void sub_queued(std::size_t n);
  // True when this session must go for the node-wide budget (else a larger
  // queue elsewhere is told to go).
  bool over_outbound_budget();
  // Frames the queue's head (a batch of up to write_batch_bytes) into the
  // write-behind layer: one socket write in flight, carrying the batch.
  void do_write();
  void on_write(boost::beast::error_code ec);
  void do_close();
  void on_close(boost::beast::error_code ec);
  void fail(boost::beast::error_code ec, const char* what);
  void abort_socket();
  void finish(bool in_destructor = false);

  boost::beast::websocket::stream<write_behind_stream> ws_;
  boost::beast::flat_buffer buffer_;
  std::shared_ptr<server_state> st_;
  community community_;
  std::string host_;
  std::string remote_ip_;
  std::unique_ptr<tcp_slot> slot_;
  boost::asio::steady_timer close_timer_;
  boost::asio::steady_timer auth_timer_;
  boost::asio::steady_timer stall_timer_;
  boost::asio::steady_timer pause_timer_;
  boost::asio::steady_timer peer_timer_;
  std::chrono::steady_clock::time_point read_resume_at_{};  // reading paused until then
  bool read_waiting_ = false;  // pause_timer_ holds the next read
  std::optional<std::string> held_frame_;  // read during a pause, forwarded after it
  std::shared_ptr<frame_credit_count> credit_ = std::make_shared<frame_credit_count>();
  bool credit_stalled_ = false;  // not reading until credit_returned()
  bool reading_ = false;         // an async_read of ours is pending
  bool peer_watch_ = false;      // peer_timer_ pending
  connection_actor actor_;

  std::shared_ptr<session_inbox> inbox_ = std::make_shared<session_inbox>();
  std::vector<session_inbox::item> taken_;  // the inbox's last batch (its capacity reused)
  std::deque<out_frame> queue_;
  std::size_t queued_bytes_ = 0;
  std::function<void(socket_sink::room)> drained_waiter_;
  std::size_t drained_at_most_ = SIZE_MAX;  // the waiter's own bound on queued bytes
  // queued_bytes_ for other sessions' budget decisions (read off-strand).
  std::atomic<std::size_t> queued_shared_{0};
  uint64_t writes_done_ = 0;        // completed writes: progress
  uint64_t writes_at_check_ = 0;    // writes_done_ when the stall watch last looked
  bool stall_watch_ = false;        // stall_timer_ pending
  bool authenticated_ = false;
  bool writing_ = false;
  std::size_t writing_frames_ = 0;  // queue_'s first frames, in the write in flight
  bool accepted_ = false;
  bool closing_ = false;     // no more frames accepted from the actor or forwarded to it
  bool close_sent_ = false;  // async_close issued
  bool finished_ = false;    // socket_closed sent, counters released
  boost::beast::websocket::close_reason close_reason_;
};

}  // namespace waggle::gateway
