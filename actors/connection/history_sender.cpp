// The connection actor's subscription memory and the sending of histories
// (docs/architecture.md, "connection actor"): a REQ's filters and the ids of
// its history are charged to the connection's budget and to the node-wide
// one; a history larger than one slice goes out as the socket drains, so
// that a client reading at any speed reaches EOSE instead of overflowing
// its session's outbound queue.

#include "actors/connection/connection_actor.hpp"

#include <algorithm>

#include <caf/send.hpp>

namespace waggle {

bool subscription::sent_in_history(const std::string& id) const {
  event_id_bin bin;
  return id_from_hex(id, bin) && std::binary_search(history_ids.begin(), history_ids.end(), bin);
}

void connection_state::release_bytes(size_t bytes) {
  if (bytes > 0 && settings.subscription_budget)
    settings.subscription_budget->release(bytes);
}

bool connection_state::charge_subscription(const std::string& sub_id, size_t bytes) {
  auto& sub = subs[sub_id];
  auto refuse = [&](const char* label, const char* reason) {
    if (env.stats)
      env.stats->count_refused(label);
    end_subscription(sub_id, status{ec::rate_limited, reason}.message());
    return false;
  };
  if (settings.max_subscription_bytes != 0
      && subscription_bytes + bytes > settings.max_subscription_bytes)
    return refuse("subscription_bytes", "subscription too large for this connection");
  if (settings.subscription_budget && !settings.subscription_budget->try_reserve(bytes))
    return refuse("subscription_bytes_total", "relay is at its subscription memory limit");
  sub.bytes += bytes;
  subscription_bytes += bytes;
  return true;
}

void connection_state::send_history(const std::string& sub_id, std::vector<std::string>&& raws) {
  size_t text = 0;
  for (auto& raw : raws)
    text += raw.size();
  // Small enough for one slice, and nothing queued before it: at once, as
  // it always was (the common case; it adds no mailbox hop).
  if (history_queue.empty() && raws.size() <= settings.history_slice_frames
      && text <= settings.history_slice_bytes) {
    for (auto& raw : raws)
      send(proto::render_event(sub_id, raw));
    return finish_history(sub_id);
  }
  // Held until the socket takes it. The connection's own cap comes first:
  // the node-wide budget alone let one slow reader with many large REQs
  // hold all of it, refusing every other connection's large history.
  size_t held = text + raws.size() * history_frame_overhead;
  if (settings.max_history_bytes != 0 && history_bytes + held > settings.max_history_bytes) {
    if (env.stats)
      env.stats->count_refused("history_bytes");
    return end_subscription(
      sub_id, status{ec::rate_limited, "too much unsent history on this connection"}.message());
  }
  if (settings.subscription_budget && !settings.subscription_budget->try_reserve(held)) {
    if (env.stats)
      env.stats->count_refused("subscription_bytes_total");
    return end_subscription(
      sub_id, status{ec::rate_limited, "relay is at its subscription memory limit"}.message());
  }
  const bool first = history_queue.empty();
  history_queue.push_back({sub_id, subs[sub_id].generation, std::move(raws), 0, held});
  history_bytes += held;
  if (first)
    history_progressed();  // the stall clock starts when the queue does
  arm_drain();
}

void connection_state::arm_drain() {
  if (drain_armed || closed)
    return;
  drain_armed = true;
  sink->notify_drained([me = caf::actor_cast<connection_actor>(self)](socket_sink::room room) {
    caf::anon_send(me, socket_drained{room.frames, room.bytes});
  });
}

void connection_state::drop_history(const std::string& sub_id) {
  // At once, wherever it stands in the queue: released only when it reached
  // the front, a closed delivery behind a stuck one stayed charged.
  std::erase_if(history_queue, [&](const history_delivery& d) {
    if (d.sub_id != sub_id)
      return false;
    history_bytes -= d.held_bytes;
    release_bytes(d.held_bytes);
    return true;
  });
}

void connection_state::history_progressed() {
  if (settings.history_stall.count() <= 0)
    return;  // no rule, no clock reading
  history_progress_at = env.steady_now();
  if (!stall_check_armed)
    arm_stall_check(settings.history_stall);
}

void connection_state::arm_stall_check(caf::timespan delay) {
  stall_check_armed = true;
  self->delayed_send(self, delay, history_stall_check{});
}

void connection_state::on_stall_check() {
  stall_check_armed = false;
  if (closed || history_queue.empty())
    return;
  // One timer per connection, not one per slice: when it fires early (the
  // queue moved since it was armed) it is armed again for the rest.
  auto now = env.steady_now();
  auto due = history_progress_at + settings.history_stall;
  if (now < due)
    return arm_stall_check(std::chrono::duration_cast<caf::timespan>(due - now));
  // The socket took no slice for the whole stall time. Every queued
  // delivery waits on the same socket, so all of them end: a client that
  // reads a frame just often enough to escape the gateway's write-stall rule
  // no longer holds its history's memory. Its live subscriptions stay.
  std::vector<std::string> stalled;
  for (auto& d : history_queue)
    stalled.push_back(d.sub_id);
  for (auto& sub_id : stalled) {
    if (env.stats)
      env.stats->count_refused("history_stall");
    end_subscription(sub_id, status{ec::rate_limited, "history not read in time"}.message());
  }
}

void connection_state::on_drained(const socket_drained& room) {
  drain_armed = false;
  if (closed || history_queue.empty())
    return;
  // At least one frame per slice, whatever the room: progress is what
  // the session's own rules judge.
  size_t frames = std::max<size_t>(1, std::min<size_t>(room.frames, settings.history_slice_frames));
  size_t bytes = std::min<size_t>(room.bytes, settings.history_slice_bytes);
  size_t sent_frames = 0, sent_bytes = 0;
  while (!history_queue.empty()) {
    auto& d = history_queue.front();
    while (d.next < d.raws.size()) {
      auto& raw = d.raws[d.next];
      if (sent_frames > 0 && (sent_frames >= frames || sent_bytes + raw.size() > bytes)) {
        history_progressed();
        return arm_drain();
      }
      sent_frames += 1;
      sent_bytes += raw.size();
      send(proto::render_event(d.sub_id, raw));
      std::string().swap(raw);  // give the text back as it goes out
      ++d.next;
    }
    auto sub_id = std::move(d.sub_id);
    history_bytes -= d.held_bytes;
    release_bytes(d.held_bytes);
    history_queue.pop_front();
    finish_history(sub_id);
  }
}

void connection_state::finish_history(const std::string& sub_id) {
  auto& sub = subs[sub_id];
  send(proto::render_eose(sub_id));
  sub.live = true;
  for (auto& ev : sub.pending)
    if (!sub.sent_in_history(ev->id))
      send(proto::render_event(sub_id, ev->raw));
  sub.pending.clear();
  sub.pending.shrink_to_fit();
}

}  // namespace waggle
