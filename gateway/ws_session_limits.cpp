// ws_session's limits that are about time and the whole node rather than one
// frame: the AUTH deadline, the write-stall watch, the node-wide outbound
// byte budget (docs/operations.md, "Connections" and "Outbound memory") and
// the watch for a peer gone while reading is paused (docs/protocol.md,
// "Refusal pacing").

#include "gateway/ws_session.hpp"

#include <poll.h>

#include "gateway/log.hpp"
#include "messages/proto/notices.hpp"

namespace waggle::gateway {

namespace beast = boost::beast;
namespace websocket = beast::websocket;

// Also where an unauthenticated session becomes an eviction candidate: it
// runs once, when the handshake is done (on_accept).
void ws_session::arm_auth_deadline() {
  if (!authenticated_)
    st_->unauth_sessions.add(this, weak_from_this());
  if (authenticated_ || closing_ || st_->limits.auth_deadline.count() <= 0)
    return;
  auth_timer_.expires_after(st_->limits.auth_deadline);
  auth_timer_.async_wait([self = shared_from_this()](beast::error_code ec) {
    if (!ec)
      self->on_auth_deadline();
  });
}

void ws_session::on_auth_deadline() {
  if (authenticated_ || closing_ || finished_)
    return;
  if (st_->api.watch)
    st_->api.watch->refused("auth_deadline");
  const auto secs = std::to_string(st_->limits.auth_deadline.count());
  // Every REQ, COUNT and EVENT needs AUTH (in open communities too): a socket
  // that has not authenticated by now only holds a slot.
  enqueue(proto::auth_deadline_notice(st_->limits.auth_deadline));
  begin_close(static_cast<uint16_t>(websocket::close_code::policy_error),
              "auth-required: no AUTH within " + secs + " s");
}

void ws_session::mark_authenticated() {
  if (authenticated_)
    return;
  authenticated_ = true;
  st_->unauth_count.fetch_sub(1);
  st_->unauth_sessions.remove(this);
  if (!finished_)
    auth_timer_.cancel();
}

void ws_session::evict_unauthenticated() {
  // Authenticated meanwhile: its slot is already given back, and it stays.
  if (authenticated_)
    return;
  // The newcomer already counts in unauth_count: give this socket's place
  // back now, not when it is destroyed. authenticated_ is what the
  // destructor reads as "no longer counted".
  authenticated_ = true;
  st_->unauth_count.fetch_sub(1);
  if (closing_ || finished_)
    return;  // going anyway
  auth_timer_.cancel();
  if (st_->api.watch)
    st_->api.watch->refused("unauthenticated_evicted");
  enqueue(proto::unauthenticated_evicted_notice());
  begin_close(static_cast<uint16_t>(websocket::close_code::policy_error),
              "auth-required: evicted for a newer unauthenticated connection");
}

// One timer per session, re-armed only while writes are pending: each expiry
// asks whether any write completed since the last one. So a socket is closed
// between write_stall and twice that after its last progress, and the frames
// a client sends never count as progress.
void ws_session::watch_writes() {
  if (stall_watch_ || finished_ || st_->limits.write_stall.count() <= 0)
    return;
  stall_watch_ = true;
  writes_at_check_ = writes_done_;
  stall_timer_.expires_after(st_->limits.write_stall);
  stall_timer_.async_wait([self = shared_from_this()](beast::error_code ec) {
    self->stall_watch_ = false;
    if (!ec)
      self->on_stall_check();
  });
}

void ws_session::on_stall_check() {
  if (finished_ || !writing_)
    return;  // nothing pending: the next write starts a new watch
  if (writes_done_ != writes_at_check_)
    return watch_writes();
  log::debug(st_->api, "write stalled, closing", host_);
  if (st_->api.watch)
    st_->api.watch->refused("write_stall");
  // The write is stuck in the kernel: no NOTICE or close frame could pass.
  abort_socket();
}

// One timer per session, re-armed only while no read of ours is pending:
// a pending read sees the peer's FIN or reset itself, a paused or stalled
// session would not see it until it read again (up to a whole pause, 10 s,
// holding the client's slot). POLLRDHUP reports the FIN even with unread
// frames queued before it; those are dropped, as they are when a read sees
// the end. A peer that sent a close frame and waits for ours has sent no
// FIN yet and is left to finish the handshake after the pause.
void ws_session::watch_peer() {
  if (peer_watch_ || finished_)
    return;
  peer_watch_ = true;
  peer_timer_.expires_after(peer_watch_interval);
  peer_timer_.async_wait([self = shared_from_this()](beast::error_code ec) {
    self->peer_watch_ = false;
    if (!ec)
      self->on_peer_watch();
  });
}

void ws_session::on_peer_watch() {
  if (finished_ || reading_ || !(read_waiting_ || credit_stalled_))
    return;  // reading again (or Beast's close reads): the read sees the end
  pollfd p{};
  p.fd = beast::get_lowest_layer(ws_).socket().native_handle();
  p.events = POLLRDHUP;  // POLLERR and POLLHUP are always reported
  if (::poll(&p, 1, 0) > 0 && (p.revents & (POLLRDHUP | POLLERR | POLLHUP | POLLNVAL))) {
    log::debug(st_->api, "peer gone while reading was paused, closing", host_);
    // No read is pending: abort_socket finishes the session at once, the
    // way a read seeing the end would (socket_closed, the counts released).
    return abort_socket();
  }
  watch_peer();
}

void ws_session::add_queued(std::size_t n) {
  queued_bytes_ += n;
  queued_shared_.store(queued_bytes_, std::memory_order_relaxed);
  st_->outbound_bytes.fetch_add(n);
}

void ws_session::sub_queued(std::size_t n) {
  queued_bytes_ -= n;
  queued_shared_.store(queued_bytes_, std::memory_order_relaxed);
  st_->outbound_bytes.fetch_sub(n);
}

void ws_session::shed() {
  if (closing_ || finished_)
    return;
  if (st_->api.watch)
    st_->api.watch->refused("outbound_budget");
  drop_slow_consumer();
}

bool ws_session::over_outbound_budget() {
  const std::size_t budget = st_->limits.max_outbound_bytes_total;
  if (budget == 0 || st_->outbound_bytes.load() <= budget)
    return false;
  // Over budget, the biggest queue goes: this one if it holds at least a
  // fair share of the budget (then it is, or is as bad as, the biggest),
  // else whichever session holds the most.
  const std::size_t fair = budget / std::max<std::size_t>(1, st_->ws_count.load());
  if (queued_bytes_ >= fair) {
    if (st_->api.watch)
      st_->api.watch->refused("outbound_budget");
    return true;
  }
  std::weak_ptr<ws_session> victim;
  std::size_t most = queued_bytes_;
  {
    // Entries leave the registry (under this lock) before their session is
    // destroyed, so reading through the raw pointers is safe here.
    std::lock_guard lock{st_->registry_mtx};
    for (auto& [ptr, weak] : st_->registry)
      if (ptr != this && ptr->queued_bytes() > most) {
        most = ptr->queued_bytes();
        victim = weak;
      }
  }
  if (!victim.expired())
    st_->gate->post_to(victim, [](ws_session& s) { s.shed(); });
  return false;
}

}  // namespace waggle::gateway
