#include "actors/connection/history_queue.hpp"

#include <algorithm>

namespace waggle {

size_t history_queue::held_bytes_of(const std::vector<std::string>& raws) {
  size_t held = 0;
  for (auto& raw : raws)
    held += raw.size() + history_frame_overhead;
  return held;
}

bool history_queue::sends_at_once(const std::vector<std::string>& raws) const {
  if (!queue_.empty() || raws.size() > limits_.slice_frames)
    return false;
  size_t text = 0;
  for (auto& raw : raws)
    text += raw.size();
  return text <= limits_.slice_bytes;
}

history_hold history_queue::hold(size_t bytes) {
  // The connection's own cap comes first: the node-wide budget alone let one
  // slow reader with many large REQs hold all of it, refusing every other
  // connection's large history.
  if (limits_.max_bytes != 0 && bytes_ + bytes > limits_.max_bytes)
    return history_hold::over_connection_cap;
  if (budget_ && !budget_->try_reserve(bytes))
    return history_hold::over_node_budget;
  bytes_ += bytes;
  return history_hold::held;
}

bool history_queue::push(history_delivery d) {
  const bool first = queue_.empty();
  queue_.push_back(std::move(d));
  return first;
}

void history_queue::release(size_t bytes) {
  if (bytes > 0 && budget_)
    budget_->release(bytes);
}

void history_queue::release_all() {
  release(bytes_);
  bytes_ = 0;
}

history_next history_queue::on_drained(size_t room_frames, size_t room_bytes,
                                       const frame_fn& frame, const finish_fn& finish) {
  // At least one frame per slice, whatever the room: progress is what
  // the session's own rules judge.
  size_t frames = std::max<size_t>(1, std::min<size_t>(room_frames, limits_.slice_frames));
  size_t bytes = std::min<size_t>(room_bytes, limits_.slice_bytes);
  size_t sent_frames = 0, sent_bytes = 0;
  while (!queue_.empty()) {
    auto& d = queue_.front();
    if (d.page_request != 0)
      return history_next::nothing;  // its next page is being read; its reply goes on
    while (d.next < d.raws.size()) {
      auto& raw = d.raws[d.next];
      if (sent_frames > 0 && (sent_frames >= frames || sent_bytes + raw.size() > bytes))
        return history_next::wait_drain;
      sent_frames += 1;
      sent_bytes += raw.size();
      frame(d.sub_id, raw);
      std::string().swap(raw);  // give the text back as it goes out
      ++d.next;
    }
    bytes_ -= d.held_bytes;
    release(d.held_bytes);
    d.held_bytes = 0;
    if (d.next_page) {
      d.raws.clear();
      d.next = 0;
      if (!d.awaiting_empty) {
        // Read the next page only once the socket has sent nearly all of
        // this one: a client that stops reading is not read for.
        d.awaiting_empty = true;
        return history_next::wait_empty;
      }
      d.awaiting_empty = false;
      return history_next::read_page;
    }
    auto sub_id = std::move(d.sub_id);
    queue_.pop_front();
    finish(sub_id);
  }
  return history_next::nothing;
}

void history_queue::page_requested(uint64_t request_id) {
  queue_.front().page_request = request_id;
}

bool history_queue::page_answered(const std::string& sub_id) {
  if (queue_.empty() || queue_.front().sub_id != sub_id || queue_.front().page_request == 0)
    return false;
  queue_.front().page_request = 0;
  return true;
}

void history_queue::refill_front(std::vector<std::string>&& raws, size_t held,
                                 std::optional<history_request> next_page) {
  auto& d = queue_.front();
  d.next_page = std::move(next_page);
  d.raws = std::move(raws);
  d.next = 0;
  d.held_bytes = held;
}

std::optional<history_request> history_queue::next_page_of(const history_request& asked,
                                                           history_reply& reply) const {
  if (!reply.more)
    return std::nullopt;
  history_request next = asked;
  next.page = std::move(reply.next);
  // A client that read one page reads the next: doubling brings a long
  // history to few reads, while the first page stays what a client that
  // never reads can cost.
  next.page.rows = std::min<uint32_t>(std::max<uint32_t>(1, asked.page.rows) * 2,
                                      std::max<uint32_t>(limits_.max_page_rows, 1));
  return next;
}

std::vector<uint64_t> history_queue::drop(const std::string& sub_id) {
  // At once, wherever it stands in the queue: released only when it reached
  // the front, a closed delivery behind a stuck one stayed charged.
  std::vector<uint64_t> reading;
  std::erase_if(queue_, [&](const history_delivery& d) {
    if (d.sub_id != sub_id)
      return false;
    if (d.page_request != 0)
      reading.push_back(d.page_request);
    bytes_ -= d.held_bytes;
    release(d.held_bytes);
    return true;
  });
  return reading;
}

std::optional<size_t> history_queue::drain_after_drop() const {
  // A drain that came while the front was reading its page armed nothing
  // (its page's answer would have): the new front must not wait for a drain
  // nobody asked for (red-team finding 1 of the paging review).
  if (queue_.empty() || queue_.front().page_request != 0)
    return std::nullopt;
  return queue_.front().awaiting_empty ? limits_.page_drain_bytes : SIZE_MAX;
}

bool history_queue::reading_pages() const {
  return std::any_of(queue_.begin(), queue_.end(),
                     [](const history_delivery& d) { return d.page_request != 0; });
}

bool history_queue::progressed(steady_time now) {
  progress_at_ = now;
  if (stall_check_armed_)
    return false;
  stall_check_armed_ = true;
  return true;
}

history_stall_verdict history_queue::check_stall(steady_time now) {
  // One check per connection, not one per slice: when it comes early (the
  // queue moved since it was armed) it is armed again for the rest.
  auto due = progress_at_ + limits_.stall;
  if (now < due) {
    stall_check_armed_ = true;
    return {std::chrono::duration_cast<std::chrono::nanoseconds>(due - now), {}};
  }
  // The socket took no slice for the whole stall time. Every queued
  // delivery waits on the same socket, so all of them end: a client that
  // reads a frame just often enough to escape the gateway's write-stall rule
  // no longer holds its history's memory.
  history_stall_verdict verdict;
  for (auto& d : queue_)
    verdict.stalled.push_back(d.sub_id);
  return verdict;
}

}  // namespace waggle
