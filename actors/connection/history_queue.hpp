#pragma once

// The histories one connection sends as its socket drains (docs/architecture.md,
// "connection actor", "Large histories"): a history larger than one slice is
// queued here, its unsent frames charged to the connection's cap and to the
// node-wide budget until they go out, and the queue ends when the socket
// takes no slice for the stall time. A plain class: the connection actor
// owns the wiring (frames, timers, page requests) and asks it what to do;
// the tests drive it with a made-up clock and budget.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "actors/connection/subscription_memory.hpp"
#include "actors/support/env.hpp"
#include "messages/reads.hpp"

namespace waggle {

struct history_limits {
  // A history larger than one slice waits for the socket to drain.
  size_t slice_frames = 256;
  size_t slice_bytes = 1u << 20;
  // Unsent history this connection may hold at once; 0 = no limit.
  size_t max_bytes = 16u << 20;
  // Queued histories end after this long without a slice taken; 0 = never.
  std::chrono::nanoseconds stall = std::chrono::seconds(60);
  // The socket must hold at most this much before a next page is read.
  size_t page_drain_bytes = 64u << 10;
  // The largest page (rows per filter) a doubling may reach.
  uint32_t max_page_rows = 500;
};

// One queued history, oldest first in the queue.
struct history_delivery {
  std::string sub_id;
  uint64_t generation = 0;
  std::vector<std::string> raws;
  size_t next = 0;
  size_t held_bytes = 0;
  // Paged: once `raws` is sent and the socket has drained to
  // page_drain_bytes (`awaiting_empty` while it is waited for), `next_page`
  // is read (`page_request` at the pool until it answers).
  std::optional<history_request> next_page;
  bool awaiting_empty = false;
  uint64_t page_request = 0;
};

// Why a history could not be held.
enum class history_hold : uint8_t { held, over_connection_cap, over_node_budget };

// What the actor does after a drain: nothing, wait for the next drain
// (`wait_drain`), wait until the socket has nearly emptied (`wait_empty`),
// or read the front delivery's next page (`read_page`). Both waits are
// progress: the actor notes it before arming the drain.
enum class history_next : uint8_t { nothing, wait_drain, wait_empty, read_page };

// What a stall check found: the queue moved meanwhile (check again in
// `recheck_in`), or these subscriptions' histories stalled.
struct history_stall_verdict {
  std::optional<std::chrono::nanoseconds> recheck_in;
  std::vector<std::string> stalled;
};

class history_queue {
 public:
  // Frames out: (subscription id, stored JSON).
  using frame_fn = std::function<void(const std::string&, const std::string&)>;
  // A history sent whole: its EOSE and pending live events follow.
  using finish_fn = std::function<void(const std::string&)>;

  explicit history_queue(history_limits limits = {}, memory_budget_ptr budget = nullptr)
    : limits_(limits), budget_(std::move(budget)) {}

  // What unsent frames of `raws` hold while queued (text and overhead).
  static size_t held_bytes_of(const std::vector<std::string>& raws);
  // Whether `raws` may go out at once: nothing queued before it, and within
  // one slice (the common case; it adds no mailbox hop).
  bool sends_at_once(const std::vector<std::string>& raws) const;
  // Charges `bytes` of unsent history to the connection's cap, then to the
  // node-wide budget; neither when either refuses.
  history_hold hold(size_t bytes);
  // Queues a delivery (its held_bytes already held). True when the queue was
  // empty: the stall clock starts.
  bool push(history_delivery d);

  // The socket drained with room for `room_frames` / `room_bytes`: sends
  // the next slice through `frame`, in order, giving back the bytes of each
  // delivery sent whole, and calls `finish` for each history sent whole.
  history_next on_drained(size_t room_frames, size_t room_bytes, const frame_fn& frame,
                          const finish_fn& finish);
  // The front delivery's next page was asked for as `request_id`.
  void page_requested(uint64_t request_id);
  // A page of `sub_id` answered: true (and no longer being read) when the
  // front delivery waited for it; false when it ended meanwhile.
  bool page_answered(const std::string& sub_id);
  // The front delivery goes on with a page's rows (`held` already held).
  void refill_front(std::vector<std::string>&& raws, size_t held,
                    std::optional<history_request> next_page);
  // The request of the page after `reply` (its rows doubled), if any.
  std::optional<history_request> next_page_of(const history_request& asked,
                                              history_reply& reply) const;

  // Drops every delivery of `sub_id` at once, wherever it stands, and gives
  // its bytes back. Returns the page requests to withdraw from the pool.
  std::vector<uint64_t> drop(const std::string& sub_id);
  // The drain the front delivery needs after a drop (SIZE_MAX: any drain),
  // or none: the queue is empty, or its front waits on a page.
  std::optional<size_t> drain_after_drop() const;
  bool reading_pages() const;

  // The stall rule. Off (stall 0): the actor reads no clock for it.
  bool stall_rule() const { return limits_.stall.count() > 0; }
  // Progress at `now` (a delivery started, or a slice was taken). True when
  // a stall check must be armed (none is on its way).
  bool progressed(steady_time now);
  // The armed stall check arrived (it is no longer on its way).
  void stall_check_arrived() { stall_check_armed_ = false; }
  // Judges the queue at `now`: a re-check (armed by this call) while the
  // last progress is recent, else every queued delivery stalled.
  history_stall_verdict check_stall(steady_time now);

  bool empty() const { return queue_.empty(); }
  size_t size() const { return queue_.size(); }
  history_delivery& front() { return queue_.front(); }
  const history_delivery& front() const { return queue_.front(); }
  // Unsent history held (the connection's cap counts this).
  size_t bytes() const { return bytes_; }
  const history_limits& limits() const { return limits_; }
  // Gives everything held back to the node-wide budget (the connection's end).
  void release_all();

 private:
  void release(size_t bytes);

  history_limits limits_;
  memory_budget_ptr budget_;
  std::deque<history_delivery> queue_;
  size_t bytes_ = 0;  // sum of the queue's held_bytes
  steady_time progress_at_{};
  bool stall_check_armed_ = false;
};

}  // namespace waggle
