// The connection actor's subscription memory and the sending of histories
// (docs/architecture.md, "connection actor"): a REQ's filters and the ids of
// its history are charged to the connection's budget and to the node-wide
// one (subscription_table.hpp); a history larger than one slice goes out as
// the socket drains (history_queue.hpp), so that a client reading at any
// speed reaches EOSE instead of overflowing its session's outbound queue.
// The decisions are the two classes'; here is their wiring: frames, the
// drain notice, the stall timer and the page requests.

#include "actors/connection/connection_actor.hpp"

#include <caf/send.hpp>

namespace waggle {

bool connection_state::charge_subscription(const std::string& sub_id, size_t bytes) {
  auto refuse = [&](const char* label, const char* reason) {
    if (env.stats)
      env.stats->count_refused(label);
    end_subscription(sub_id, status{ec::rate_limited, reason}.message());
    return false;
  };
  switch (subs.charge(sub_id, bytes)) {
    case subscription_charge::over_connection_cap:
      return refuse("subscription_bytes", "subscription too large for this connection");
    case subscription_charge::over_node_budget:
      return refuse("subscription_bytes_total", "relay is at its subscription memory limit");
    case subscription_charge::charged:
      break;
  }
  return true;
}

bool connection_state::hold_history(const std::string& sub_id, size_t held) {
  switch (history.hold(held)) {
    case history_hold::over_connection_cap:
      if (env.stats)
        env.stats->count_refused("history_bytes");
      end_subscription(
        sub_id, status{ec::rate_limited, "too much unsent history on this connection"}.message());
      return false;
    case history_hold::over_node_budget:
      if (env.stats)
        env.stats->count_refused("subscription_bytes_total");
      end_subscription(
        sub_id, status{ec::rate_limited, "relay is at its subscription memory limit"}.message());
      return false;
    case history_hold::held:
      break;
  }
  return true;
}

void connection_state::send_history(const std::string& sub_id, std::vector<std::string>&& raws,
                                    std::optional<history_request> next_page) {
  if (history.sends_at_once(raws)) {
    for (auto& raw : raws)
      send(proto::render_event(sub_id, raw));
    if (!next_page)
      return finish_history(sub_id);
    // The next page waits until the socket has sent nearly all of this one.
    history.push({sub_id, subs.get(sub_id).generation, {}, 0, 0, std::move(next_page), true, 0});
    history_progressed();
    return arm_drain(settings.history_page_drain_bytes);
  }
  // Held until the socket takes it.
  size_t held = history_queue::held_bytes_of(raws);
  if (!hold_history(sub_id, held))
    return;
  if (history.push({sub_id, subs.get(sub_id).generation, std::move(raws), 0, held,
                    std::move(next_page), false, 0}))
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

void connection_state::read_page() {
  auto& d = history.front();
  auto sub_id = d.sub_id;
  auto generation = d.generation;
  if (env.stats)
    ++env.stats->history_pages;
  auto asked = self->request(peers.reader, settings.read_timeout, *d.next_page);
  history.page_requested(asked.id().request_id().integer_value());
  std::move(asked).then(
    traced_reply<history_reply>(self, env,
                                [this, sub_id, generation](history_reply& reply) {
                                  on_page(sub_id, generation, std::move(reply));
                                }),
    [this, sub_id, generation](caf::error&) {
      if (subs.is_current(sub_id, generation))
        end_subscription(sub_id, "error: history query failed");
    });
}

void connection_state::on_page(const std::string& sub_id, uint64_t generation,
                               history_reply&& reply) {
  if (!subs.is_current(sub_id, generation) || !history.page_answered(sub_id))
    return;  // ended (its delivery went with it) while the page was read
  // The reader checked access again for this page: a removal since the
  // last one ends the history here, as a revocation (no client frame caused
  // it, so it is not paced; red-team finding 2 of the paging review).
  if (reply.err.code == ec::restricted)
    return revoke_subscription(sub_id, reply.err.message());
  if (!reply.err.ok())
    return end_subscription(sub_id, reply.err.message());
  subscription_table::remember_history(subs.get(sub_id), reply.raws);
  if (!charge_subscription(sub_id, reply.raws.size() * history_id_bytes))
    return;
  size_t held = history_queue::held_bytes_of(reply.raws);
  // Either refusal ends the subscription, and its delivery goes with it.
  if (!hold_history(sub_id, held))
    return;
  auto next = history.next_page_of(*history.front().next_page, reply);
  history.refill_front(std::move(reply.raws), held, std::move(next));
  history_progressed();
  arm_drain();
}

void connection_state::history_progressed() {
  if (!history.stall_rule())
    return;  // no rule, no clock reading
  if (history.progressed(env.steady_now()))
    arm_stall_check(settings.history_stall);
}

void connection_state::arm_stall_check(caf::timespan delay) {
  self->delayed_send(self, delay, history_stall_check{});
}

void connection_state::on_stall_check() {
  history.stall_check_arrived();
  if (closed || history.empty())
    return;
  auto verdict = history.check_stall(env.steady_now());
  if (verdict.recheck_in)
    return arm_stall_check(*verdict.recheck_in);
  // Its live subscriptions stay; only the queued histories end.
  for (auto& sub_id : verdict.stalled) {
    if (env.stats)
      env.stats->count_refused("history_stall");
    end_subscription(sub_id, status{ec::rate_limited, "history not read in time"}.message());
  }
}

void connection_state::on_drained(const socket_drained& room) {
  drain_armed = false;
  if (closed || history.empty())
    return;
  auto next = history.on_drained(
    room.frames, room.bytes,
    [this](const std::string& sub_id, const std::string& raw) {
      send(proto::render_event(sub_id, raw));
    },
    [this](const std::string& sub_id) { finish_history(sub_id); });
  switch (next) {
    case history_next::wait_drain:
      history_progressed();
      return arm_drain();
    case history_next::wait_empty:
      history_progressed();
      return arm_drain(settings.history_page_drain_bytes);
    case history_next::read_page:
      return read_page();
    case history_next::nothing:
      return;
  }
}

void connection_state::finish_history(const std::string& sub_id) {
  send(proto::render_eose(sub_id));
  for (auto& ev : subs.go_live(sub_id))
    send(proto::render_event(sub_id, ev->raw));
}

}  // namespace waggle
