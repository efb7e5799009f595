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

namespace {

// Stored JSON is our own rendering, which starts with the id:
// {"id":"<64 hex>",...}. Anything else is used whole as its own key.
std::string_view id_of_raw(std::string_view raw) {
  constexpr std::string_view head = "{\"id\":\"";
  if (raw.size() >= head.size() + 64 && raw.substr(0, head.size()) == head)
    return raw.substr(head.size(), 64);
  return raw;
}

}  // namespace

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

void connection_state::remember_history_ids(subscription& sub,
                                            const std::vector<std::string>& raws) {
  auto old = sub.history_ids.size();
  sub.history_ids.reserve(old + raws.size());
  for (auto& raw : raws) {
    event_id_bin id;
    if (id_from_hex(id_of_raw(raw), id))
      sub.history_ids.push_back(id);
  }
  // Pages never repeat an id (each reads past the last one's horizon), so
  // the new ids merge into the sorted ones.
  std::sort(sub.history_ids.begin() + static_cast<std::ptrdiff_t>(old), sub.history_ids.end());
  std::inplace_merge(sub.history_ids.begin(),
                     sub.history_ids.begin() + static_cast<std::ptrdiff_t>(old),
                     sub.history_ids.end());
}

std::optional<history_request> connection_state::next_page_of(const history_request& asked,
                                                              history_reply& reply) const {
  if (!reply.more)
    return std::nullopt;
  history_request next = asked;
  next.page = std::move(reply.next);
  // A client that read one page reads the next: doubling brings a long
  // history to few reads, while the first page stays what a client that
  // never reads can cost.
  next.page.rows = std::min<uint32_t>(std::max<uint32_t>(1, asked.page.rows) * 2,
                                      std::max<uint32_t>(settings.limits.max_limit, 1));
  return next;
}

bool connection_state::hold_history(const std::string& sub_id, size_t held) {
  // The connection's own cap comes first: the node-wide budget alone let one
  // slow reader with many large REQs hold all of it, refusing every other
  // connection's large history.
  if (settings.max_history_bytes != 0 && history_bytes + held > settings.max_history_bytes) {
    if (env.stats)
      env.stats->count_refused("history_bytes");
    end_subscription(sub_id,
                     status{ec::rate_limited, "too much unsent history on this connection"}.message());
    return false;
  }
  if (settings.subscription_budget && !settings.subscription_budget->try_reserve(held)) {
    if (env.stats)
      env.stats->count_refused("subscription_bytes_total");
    end_subscription(sub_id,
                     status{ec::rate_limited, "relay is at its subscription memory limit"}.message());
    return false;
  }
  history_bytes += held;
  return true;
}

void connection_state::send_history(const std::string& sub_id, std::vector<std::string>&& raws,
                                    std::optional<history_request> next_page) {
  size_t text = 0;
  for (auto& raw : raws)
    text += raw.size();
  // Small enough for one slice, and nothing queued before it: at once, as
  // it always was (the common case; it adds no mailbox hop).
  if (history_queue.empty() && raws.size() <= settings.history_slice_frames
      && text <= settings.history_slice_bytes) {
    for (auto& raw : raws)
      send(proto::render_event(sub_id, raw));
    if (!next_page)
      return finish_history(sub_id);
    // The next page waits until the socket has sent nearly all of this one.
    history_queue.push_back({sub_id, subs[sub_id].generation, {}, 0, 0, std::move(next_page),
                             true, 0});
    history_progressed();
    return arm_drain(settings.history_page_drain_bytes);
  }
  // Held until the socket takes it.
  size_t held = text + raws.size() * history_frame_overhead;
  if (!hold_history(sub_id, held))
    return;
  const bool first = history_queue.empty();
  history_queue.push_back(
    {sub_id, subs[sub_id].generation, std::move(raws), 0, held, std::move(next_page), false, 0});
  if (first)
    history_progressed();  // the stall clock starts when the queue does
  arm_drain();
}

void connection_state::arm_drain(size_t at_most_bytes) {
  if (drain_armed || closed)
    return;
  drain_armed = true;
  sink->notify_drained(
    [me = connection_actor{self}](socket_sink::room room) {
      caf::anon_send(me, socket_drained{room.frames, room.bytes});
    },
    at_most_bytes);
}

void connection_state::read_page(history_delivery& d) {
  auto sub_id = d.sub_id;
  auto generation = d.generation;
  if (env.stats)
    ++env.stats->history_pages;
  auto asked = self->request(peers.reader, settings.read_timeout, *d.next_page);
  d.page_request = asked.id().request_id().integer_value();
  std::move(asked).then(
    traced_reply<history_reply>(self, env,
                                [this, sub_id, generation](history_reply& reply) {
                                  on_page(sub_id, generation, std::move(reply));
                                }),
    [this, sub_id, generation](caf::error&) {
      if (is_current(sub_id, generation))
        end_subscription(sub_id, "error: history query failed");
    });
}

void connection_state::on_page(const std::string& sub_id, uint64_t generation,
                               history_reply&& reply) {
  if (!is_current(sub_id, generation) || history_queue.empty()
      || history_queue.front().sub_id != sub_id || history_queue.front().page_request == 0)
    return;  // ended (its delivery went with it) while the page was read
  auto& d = history_queue.front();
  d.page_request = 0;
  // The reader checked access again for this page: a removal since the
  // last one ends the history here, as a revocation (no client frame caused
  // it, so it is not paced; red-team finding 2 of the paging review).
  if (reply.err.code == ec::restricted)
    return revoke_subscription(sub_id, reply.err.message());
  if (!reply.err.ok())
    return end_subscription(sub_id, reply.err.message());
  auto& sub = subs[sub_id];
  remember_history_ids(sub, reply.raws);
  if (!charge_subscription(sub_id, reply.raws.size() * history_id_bytes))
    return;
  size_t held = 0;
  for (auto& raw : reply.raws)
    held += raw.size() + history_frame_overhead;
  // Either refusal ends the subscription, and drop_history takes `d` with it.
  if (!hold_history(sub_id, held))
    return;
  d.next_page = next_page_of(*d.next_page, reply);
  d.raws = std::move(reply.raws);
  d.next = 0;
  d.held_bytes = held;
  history_progressed();
  arm_drain();
}

void connection_state::drop_history(const std::string& sub_id) {
  // At once, wherever it stands in the queue: released only when it reached
  // the front, a closed delivery behind a stuck one stayed charged.
  std::vector<uint64_t> reading;
  std::erase_if(history_queue, [&](const history_delivery& d) {
    if (d.sub_id != sub_id)
      return false;
    if (d.page_request != 0)
      reading.push_back(d.page_request);
    history_bytes -= d.held_bytes;
    release_bytes(d.held_bytes);
    return true;
  });
  // A page still queued at the pool must not run for nobody.
  if (!reading.empty())
    self->send(peers.reader, read_withdraw{std::move(reading), false});
  // A drain that came while the front was reading its page armed nothing
  // (on_page would have): the new front must not wait for a drain nobody
  // asked for (red-team finding 1 of the paging review).
  if (!history_queue.empty() && history_queue.front().page_request == 0)
    arm_drain(history_queue.front().awaiting_empty ? settings.history_page_drain_bytes
                                                   : SIZE_MAX);
}

bool connection_state::reading_pages() const {
  return std::any_of(history_queue.begin(), history_queue.end(),
                     [](const history_delivery& d) { return d.page_request != 0; });
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
    if (d.page_request != 0)
      return;  // its next page is being read; its reply goes on
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
    history_bytes -= d.held_bytes;
    release_bytes(d.held_bytes);
    d.held_bytes = 0;
    if (d.next_page) {
      d.raws.clear();
      d.next = 0;
      if (!d.awaiting_empty) {
        // Read the next page only once the socket has sent nearly all of
        // this one: a client that stops reading is not read for.
        d.awaiting_empty = true;
        history_progressed();
        return arm_drain(settings.history_page_drain_bytes);
      }
      d.awaiting_empty = false;
      return read_page(d);
    }
    auto sub_id = std::move(d.sub_id);
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
