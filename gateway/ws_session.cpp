#include "gateway/ws_session.hpp"

#include <algorithm>
#include <array>

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <caf/send.hpp>

#include "gateway/log.hpp"
#include "messages/proto/notices.hpp"
#include "messages/socket.hpp"

namespace waggle::gateway {

namespace beast = boost::beast;
namespace http = beast::http;
namespace websocket = beast::websocket;
namespace net = boost::asio;

namespace {

// The connection actor's handle on its socket: holds the session weakly, so
// a lingering actor never keeps a dead socket alive; callable from any thread.
class session_sink final : public socket_sink {
 public:
  session_sink(std::weak_ptr<ws_session> s, std::shared_ptr<post_gate> gate,
               std::shared_ptr<frame_credit_count> credit, std::shared_ptr<session_inbox> inbox)
    : s_(std::move(s)),
      gate_(std::move(gate)),
      credit_(std::move(credit)),
      inbox_(std::move(inbox)) {}
  void send_text(std::string frame) override { push({out_frame{std::move(frame)}, {}}); }
  void send_frame(out_frame frame) override { push({std::move(frame), {}}); }
  void close(uint16_t code, std::string reason) override {
    push({{}, [code, r = std::move(reason)](ws_session& s) mutable {
            s.begin_close(code, std::move(r));
          }});
  }
  void notify_drained(std::function<void(room)> done, std::size_t at_most_bytes) override {
    // Through the inbox: the room it reports must count the frames sent before it.
    push({{}, [d = std::move(done), at_most_bytes](ws_session& s) mutable {
            s.notify_drained(std::move(d), at_most_bytes);
          }});
  }
  void authenticated() override {
    gate_->post_to(s_, [](ws_session& s) { s.mark_authenticated(); });
  }
  void pause_reading(std::chrono::milliseconds how_long) override {
    gate_->post_to(s_, [how_long](ws_session& s) { s.pause_reading(how_long); });
  }
  void frame_handled() override {
    // Only the step down from the limit can find the session stalled (see
    // ws_session::forward), so every other frame costs one atomic operation.
    if (credit_->outstanding.fetch_sub(1) == ws_session::frame_credit)
      gate_->post_to(s_, [](ws_session& s) { s.credit_returned(); });
  }

 private:
  // No item is stranded: `rung` is set and cleared under the mutex, by the
  // push that posts a drain and by the drain that takes the items, so every
  // push either finds a drain that has not taken the items yet or posts one.
  void push(session_inbox::item it) {
    bool ring = false;
    {
      std::lock_guard lock{inbox_->mtx};
      if (inbox_->dead)
        return;
      inbox_->items.push_back(std::move(it));
      ring = !inbox_->rung;
      inbox_->rung = true;
    }
    // A failed post means the session is gone (or the server stopped): its
    // finish() has emptied the inbox and marked it dead, or is about to.
    if (ring)
      gate_->post_to(s_, [](ws_session& s) { s.take_inbox(); });
  }

  std::weak_ptr<ws_session> s_;
  std::shared_ptr<post_gate> gate_;
  std::shared_ptr<frame_credit_count> credit_;
  std::shared_ptr<session_inbox> inbox_;
};

}  // namespace

ws_session::ws_session(beast::tcp_stream&& stream, std::shared_ptr<server_state> st,
                       community community, std::string host, std::string remote_ip,
                       std::unique_ptr<tcp_slot> slot)
  : ws_(std::move(stream)),
    st_(std::move(st)),
    community_(std::move(community)),
    host_(std::move(host)),
    remote_ip_(std::move(remote_ip)),
    slot_(std::move(slot)),
    close_timer_(ws_.get_executor()),
    auth_timer_(ws_.get_executor()),
    stall_timer_(ws_.get_executor()),
    pause_timer_(ws_.get_executor()),
    peer_timer_(ws_.get_executor()) {}

ws_session::~ws_session() {
  // Normally finish() already ran; if the io_context was stopped with the
  // session still open, this is where the actor learns about it.
  finish(true);
  if (!authenticated_)
    st_->unauth_count.fetch_sub(1);
  if (queued_bytes_)  // a frame whose write never completed (io_context stopped)
    st_->outbound_bytes.fetch_sub(queued_bytes_);
  st_->ws_count.fetch_sub(1);
}

void ws_session::run(http::request<http::string_body> req) {
  configure();
  ws_.async_accept(req, beast::bind_front_handler(&ws_session::on_accept, shared_from_this()));
}

void ws_session::run(std::string raw) {
  configure();
  // Beast copies the bytes into its read buffer before returning.
  ws_.async_accept(net::buffer(raw),
                   beast::bind_front_handler(&ws_session::on_accept, shared_from_this()));
}

void ws_session::configure() {
  // Holds the session while a socket write of the layer is in flight.
  ws_.next_layer().set_owner(weak_from_this());
  // The websocket stream has its own timeouts; the tcp_stream's must be off.
  beast::get_lowest_layer(ws_).expires_never();
  websocket::stream_base::timeout opt{};
  opt.handshake_timeout = std::chrono::seconds(30);
  opt.idle_timeout = 2 * st_->limits.ping_interval;  // a ping goes out every ping_interval
  opt.keep_alive_pings = true;
  ws_.set_option(opt);
  ws_.set_option(websocket::stream_base::decorator(
    [](websocket::response_type& res) { res.set(http::field::server, "waggle"); }));
  // Our frame limit is enforced in on_read, with a real close handshake
  // (async_close reads until the peer's close). Beast's own limit, kept as a
  // memory bound well above ours, tears down after draining a single 2 KiB
  // read (Beast 1.81 teardown_tcp_op tests the wrong byte count), so a
  // client still writing the rest of its frame gets a reset and can lose the
  // 1009 close frame.
  ws_.read_message_max(4 * st_->limits.max_frame_bytes);
  ws_.auto_fragment(false);
  ws_.text(true);
}

void ws_session::on_accept(beast::error_code ec) {
  if (ec)
    return fail(ec, "accept");
  accepted_ = true;
  if (st_->api.watch)
    st_->api.watch->connection_opened();
  {
    std::lock_guard lock{st_->registry_mtx};
    st_->registry.emplace(this, weak_from_this());
  }
  try {
    actor_ = st_->api.open_connection(community_, host_, remote_ip_,
                                      std::make_shared<session_sink>(weak_from_this(), st_->gate,
                                                                     credit_, inbox_));
  } catch (const std::exception& e) {
    log::warn(st_->api, "open_connection threw", e.what());
  }
  if (!actor_) {
    begin_close(static_cast<uint16_t>(websocket::close_code::internal_error), "internal error");
  } else if (st_->shutting_down.load()) {
    begin_close(static_cast<uint16_t>(websocket::close_code::going_away), "going away");
  }
  arm_auth_deadline();
  do_read();
}

void ws_session::do_read() {
  reading_ = true;
  ws_.async_read(buffer_, beast::bind_front_handler(&ws_session::on_read, shared_from_this()));
}

void ws_session::pause_reading(std::chrono::milliseconds how_long) {
  read_resume_at_ = std::max(read_resume_at_, std::chrono::steady_clock::now() + how_long);
}

void ws_session::credit_returned() {
  // Also posted when the session never stalled (the actor caught up between
  // forward() and read_next()'s look): read_next looks again either way.
  if (!credit_stalled_ || finished_)
    return;
  credit_stalled_ = false;
  read_next();
}

// No wake-up is lost. Only forward() raises outstanding, on the strand, and
// read_next() looks at it on the strand after every forward() and before
// every read, so a read is issued only below frame_credit and at most one
// frame comes of it: outstanding never exceeds frame_credit. The session
// stalls only when its look saw exactly frame_credit; from then on the count
// can only fall (nothing raises it while no read is pending), so the one
// fetch_sub that takes it down from frame_credit happens after the look, and
// that one posts credit_returned(), which the strand runs after the handler
// that set credit_stalled_. A credit_returned() that finds no stall (the
// actor handled the frame before the look) does nothing.
void ws_session::forward(std::string frame) {
  if (closing_ || !actor_)
    return;  // not sent, so not counted: the actor will not hand it back
  credit_->outstanding.fetch_add(1);
  caf::anon_send(actor_, socket_frame{std::move(frame)});
}

void ws_session::read_next() {
  if (read_waiting_ || credit_stalled_ || finished_)
    return;
  if (std::chrono::steady_clock::now() >= read_resume_at_) {
    if (held_frame_) {
      // The frame that completed the read pending when the pause came.
      auto frame = std::move(*held_frame_);
      held_frame_.reset();
      forward(std::move(frame));
    }
    // Out of credit: the actor's mailbox holds enough of this socket's
    // frames; the rest wait in TCP buffers, as in a pause. A closing session
    // forwards nothing and reads on to find the peer's close.
    if (!closing_ && credit_->outstanding.load() >= frame_credit) {
      credit_stalled_ = true;
      if (st_->api.watch)
        st_->api.watch->refused("frame_credit");
      return watch_peer();
    }
    return do_read();
  }
  // Not reading leaves the flood in the kernel's buffers and, once those are
  // full, in the client's: TCP's own flow control does the pacing.
  read_waiting_ = true;
  pause_timer_.expires_at(read_resume_at_);
  pause_timer_.async_wait([self = shared_from_this()](beast::error_code ec) {
    self->read_waiting_ = false;
    if (!ec && !self->finished_)
      self->read_next();
  });
  watch_peer();
}

void ws_session::on_read(beast::error_code ec, std::size_t) {
  reading_ = false;
  if (ec) {
    // message_too_big: Beast has already sent close 1009 and torn down.
    fail(ec, "read");
    // Closed, not just finished: a write may be pending to a peer that half
    // closed and reads nothing, and finish() stops the stall watch and the
    // close grace that would otherwise end it (the session, its fd and slot
    // were held until the peer closed its end).
    return abort_socket();
  }
  if (buffer_.size() > st_->limits.max_frame_bytes) {
    // Too big: never forwarded; close 1009 with a handshake, and keep reading
    // (and discarding) until the peer's close arrives.
    buffer_.consume(buffer_.size());
    begin_close(static_cast<uint16_t>(websocket::close_code::too_big), "message too big");
    return do_read();
  }
  // Nostr clients send text; binary frames are forwarded as text too and the
  // connection actor rejects whatever is not valid JSON.
  // A read is always pending, so a pause finds one frame already on its way:
  // held until the pause ends, like the frames behind it.
  if (std::chrono::steady_clock::now() < read_resume_at_)
    held_frame_ = beast::buffers_to_string(buffer_.data());
  else
    forward(beast::buffers_to_string(buffer_.data()));
  buffer_.consume(buffer_.size());
  read_next();
}

void ws_session::take_inbox() {
  {
    std::lock_guard lock{inbox_->mtx};
    taken_.swap(inbox_->items);  // the inbox gets the last batch's capacity
    inbox_->rung = false;
  }
  for (auto& it : taken_) {
    if (it.call)
      it.call(*this);
    else
      enqueue(std::move(it.frame), false);
  }
  taken_.clear();
  if (!writing_ && !queue_.empty() && !finished_)
    do_write();
}

void ws_session::enqueue(out_frame frame, bool start) {
  if (closing_ || finished_)
    return;
  add_queued(frame.size());
  queue_.push_back(std::move(frame));
  if (queue_.size() > st_->limits.max_outbound_frames
      || queued_bytes_ > st_->limits.max_outbound_bytes) {
    if (st_->api.watch)
      st_->api.watch->refused("slow_consumer");
    return drop_slow_consumer();
  }
  if (over_outbound_budget())
    return drop_slow_consumer();
  if (start && !writing_)
    do_write();
}

bool ws_session::below_low_water() const {
  // A quarter of either cap: the sender's next slice (at most half the room
  // left) then never brings the queue near the cap.
  return queue_.size() <= st_->limits.max_outbound_frames / 4
         && queued_bytes_ <= st_->limits.max_outbound_bytes / 4;
}

void ws_session::notify_drained(std::function<void(socket_sink::room)> done,
                                std::size_t at_most_bytes) {
  if (closing_ || finished_)
    return;  // the actor hears socket_closed instead
  drained_waiter_ = std::move(done);
  drained_at_most_ = at_most_bytes;
  fire_drained_if_low();
}

void ws_session::fire_drained_if_low() {
  if (!drained_waiter_ || !below_low_water() || queued_bytes_ > drained_at_most_)
    return;
  auto done = std::move(drained_waiter_);
  drained_waiter_ = nullptr;
  auto& lim = st_->limits;
  done({(lim.max_outbound_frames - queue_.size()) / 2,
        (lim.max_outbound_bytes - queued_bytes_) / 2});
}

void ws_session::drop_slow_consumer() {
  log::debug(st_->api, "dropping slow consumer", host_);
  // Keep the batch being written (it is counted until written), drop everything else.
  std::size_t keep = writing_ ? writing_frames_ : 0;
  while (queue_.size() > keep) {
    sub_queued(queue_.back().size());
    queue_.pop_back();
  }
  auto notice = proto::slow_consumer_notice();
  add_queued(notice.size());
  queue_.push_back(out_frame{std::move(notice)});
  begin_close(static_cast<uint16_t>(websocket::close_code::policy_error), "slow consumer");
  if (!writing_)
    do_write();
}

void ws_session::begin_close(uint16_t code, std::string reason) {
  if (closing_ || finished_)
    return;
  closing_ = true;
  // WebSocket close reasons are limited to 123 bytes.
  if (reason.size() > 123)
    reason.resize(123);
  close_reason_ = websocket::close_reason(static_cast<websocket::close_code>(code), reason);
  // Bound the flush and the close handshake: a client that does not read
  // would otherwise keep the write (and the socket) pending forever.
  close_timer_.expires_after(close_grace);
  close_timer_.async_wait([self = shared_from_this()](beast::error_code ec) {
    if (!ec && !self->finished_) {
      log::debug(self->st_->api, "close grace expired, closing TCP", self->host_);
      self->abort_socket();
    }
  });
  if (!writing_ && queue_.empty())
    do_close();
}

void ws_session::do_write() {
  writing_ = true;
  watch_writes();
  auto& out = ws_.next_layer();
  std::size_t bytes = 0;
  writing_frames_ = 0;
  for (const auto& f : queue_) {
    if (writing_frames_ > 0 && bytes + f.size() > write_batch_bytes)
      break;
    // The event's JSON is shared by every subscriber's frame; it is copied
    // once more here, into this socket's outgoing bytes.
    if (!out.append_text_frame(f.text, f.shared ? std::string_view{*f.shared} : std::string_view{},
                               std::string_view{f.tail.data(), f.tail.size()}))
      break;  // Beast sent its close (the peer's close answered): nothing may follow
    bytes += f.size();
    ++writing_frames_;
  }
  // Weakly: the layer keeps this callback, and the write in flight holds
  // the session until it completes.
  out.when_written([weak = weak_from_this()](beast::error_code ec) {
    if (auto self = weak.lock())
      self->on_write(ec);
  });
}

void ws_session::on_write(beast::error_code ec) {
  writing_ = false;
  auto done = std::min(writing_frames_, queue_.size());
  writing_frames_ = 0;
  if (finished_) {
    while (!queue_.empty()) {
      sub_queued(queue_.front().size());
      queue_.pop_front();
    }
    return;
  }
  if (ec) {
    fail(ec, "write");
    // Finishes now, or when the pending read completes with an error.
    return abort_socket();
  }
  ++writes_done_;
  for (std::size_t k = 0; k < done; ++k) {
    sub_queued(queue_.front().size());
    queue_.pop_front();
  }
  if (!closing_)
    fire_drained_if_low();
  if (!queue_.empty() && !ws_.next_layer().sealed())
    return do_write();
  if (closing_ && !close_sent_)
    do_close();
}

void ws_session::do_close() {
  if (close_sent_ || finished_)
    return;
  close_sent_ = true;
  ws_.async_close(close_reason_,
                  beast::bind_front_handler(&ws_session::on_close, shared_from_this()));
}

void ws_session::on_close(beast::error_code ec) {
  if (ec)
    fail(ec, "close");
  // The read loop ends with websocket::error::closed (or an abort) and finishes.
  abort_socket();
}

void ws_session::abort_socket() {
  beast::error_code ignored;
  beast::get_lowest_layer(ws_).socket().shutdown(net::ip::tcp::socket::shutdown_both, ignored);
  beast::get_lowest_layer(ws_).close();
  // A pending read completes with an error and finishes; with none (paused,
  // out of credit, or Beast's close reading for itself) nothing else would
  // until the pause or the stall ended.
  if (!reading_)
    finish();
}

void ws_session::fail(beast::error_code ec, const char* what) {
  // Normal ends of a socket, timeouts and client protocol errors (the
  // websocket category) are not worth more than a debug line.
  if (ec == websocket::error::closed || ec == net::error::operation_aborted
      || ec == net::error::eof || ec == net::error::connection_reset
      || ec == net::error::bad_descriptor || ec == net::error::broken_pipe
      || ec == net::error::not_connected || ec == beast::error::timeout
      || ec.category() == websocket::make_error_code(websocket::error::closed).category()
      || ec.category() == http::make_error_code(http::error::end_of_stream).category()) {
    log::debug(st_->api, what, ec.message());
    return;
  }
  log::warn(st_->api, what, ec.message());
}

void ws_session::finish(bool in_destructor) {
  if (finished_)
    return;
  finished_ = true;
  closing_ = true;
  if (!in_destructor) {
    close_timer_.cancel();
    auth_timer_.cancel();
    stall_timer_.cancel();
    pause_timer_.cancel();
    peer_timer_.cancel();
  }
  // A write in flight still counts its frames until it completes (on_write,
  // or the destructor, gives their bytes back then).
  while (queue_.size() > (writing_ && !in_destructor ? writing_frames_ : 0u)) {
    sub_queued(queue_.back().size());
    queue_.pop_back();
  }
  drained_waiter_ = nullptr;  // holds the actor's handle
  {
    // Calls waiting in the inbox may hold the actor's handle too (and the
    // actor holds the sink, which holds the inbox); destroyed outside the lock.
    std::vector<session_inbox::item> left;
    {
      std::lock_guard lock{inbox_->mtx};
      inbox_->dead = true;
      left.swap(inbox_->items);
    }
  }
  if (!accepted_)
    return;
  if (actor_)
    caf::anon_send(actor_, socket_closed{});
  if (st_->api.watch)
    st_->api.watch->connection_closed();
  {
    std::lock_guard lock{st_->registry_mtx};
    st_->registry.erase(this);
  }
  st_->registry_cv.notify_all();
}

}  // namespace waggle::gateway
