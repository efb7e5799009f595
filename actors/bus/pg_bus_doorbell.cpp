#include "actors/bus/pg_bus_doorbell.hpp"

#include "actors/support/log.hpp"

namespace waggle {

void bus_doorbell_state::mark(const std::vector<int32_t>& shards) {
  for (auto s : shards)
    if (s >= 0 && s < static_cast<int32_t>(bus_shard_count))
      dirty.insert(s);
  ring_due();
}

void bus_doorbell_state::ring_due() {
  auto now = env.steady_now();
  std::vector<std::string> channels;
  std::vector<int32_t> ringing;
  steady_time next_due = steady_time::max();
  if (now < retry_at)
    next_due = retry_at;
  for (auto i = dirty.begin(); now >= retry_at && i != dirty.end();) {
    auto due = last_rung[*i] + settings.doorbell_window;
    if (now >= due) {
      channels.push_back(db::bus::shard_channel(*i));
      ringing.push_back(*i);
      last_rung[*i] = now;
      i = dirty.erase(i);
    } else {
      next_due = std::min(next_due, due);
      ++i;
    }
  }
  if (!channels.empty()) {
    try {
      if (!conn)
        conn = db::bus::open(settings.database_url, "doorbell", settings.statement_timeout);
      db::bus::ring(*conn, channels);
      backoff = std::chrono::milliseconds{0};
      if (env.stats)
        env.stats->bus.notifies += channels.size();
    } catch (const std::exception& e) {
      // A lost ring costs latency, not messages (the fetchers poll), but the
      // shards stay dirty: their trailing edge still comes, once the
      // database answers again.
      conn.reset();
      dirty.insert(ringing.begin(), ringing.end());
      backoff = std::min(std::max(backoff * 2, std::chrono::milliseconds{50}),
                         settings.reconnect_max);
      retry_at = now + backoff;
      next_due = retry_at;
      if (env.stats)
        env.stats->bus.count_dropped("notify_failed", channels.size());
      log::warn("bus", "doorbell could not ring", {{"error", e.what()}});
    }
  }
  if (!dirty.empty() && !trailing_scheduled) {
    trailing_scheduled = true;
    auto wait = std::chrono::duration_cast<std::chrono::microseconds>(next_due - now);
    self->delayed_send(self, std::max(wait, std::chrono::microseconds{1}), bus_tick{});
  }
}

bus_doorbell_actor::behavior_type bus_doorbell_impl(bus_doorbell_state::ptr self,
                                                    pg_bus_settings settings, node_env env) {
  self->state.self = self;
  self->state.settings = std::move(settings);
  self->state.env = std::move(env);
  // Connected now (see the publisher): a ring must not need a free slot.
  try {
    self->state.conn = db::bus::open(self->state.settings.database_url, "doorbell",
                                     self->state.settings.statement_timeout);
  } catch (const std::exception& e) {
    log::warn("bus", "doorbell cannot connect yet", {{"error", e.what()}});
  }
  return {
    [self](bus_shards& s) { self->state.mark(s.shards); },
    [self](bus_tick) {
      self->state.trailing_scheduled = false;
      self->state.ring_due();
    },
  };
}

}  // namespace waggle
