#include "actors/ingest_actor.hpp"

#include "actors/log.hpp"
#include "actors/trace_recorder.hpp"

namespace waggle {

void ingest_state::fail_everything(const std::string& reason) {
  for (auto& [writer, batch] : in_flight)
    for (auto& p : batch)
      p.promise.deliver(ingest_reply{db::write_outcome::failed, reason});
  in_flight.clear();
  for (auto& p : queue)
    p.promise.deliver(ingest_reply{db::write_outcome::failed, reason});
  queue.clear();
}

void ingest_state::note_arrival(const std::string& author, time_point now) {
  recent[recent_next] = {author, now};
  recent_next = (recent_next + 1) % recent.size();
}

bool ingest_state::should_hold(time_point now) const {
  auto delay = settings.commit_delay;
  if (delay.count() == 0 || queue.empty() || queue.size() >= settings.max_batch)
    return false;
  if (now - queue.front().queued_at >= delay)
    return false;
  // Distinct authors of the recent arrivals (a few dozen: a linear scan).
  auto since = now - delay * 10;
  std::array<const std::string*, remembered> seen{};
  size_t distinct = 0;
  for (auto& a : recent) {
    if (a.author.empty() || a.at < since)
      continue;
    bool known = false;
    for (size_t i = 0; i < distinct && !known; ++i)
      known = *seen[i] == a.author;
    if (!known)
      seen[distinct++] = &a.author;
  }
  return distinct >= settings.commit_siblings;
}

namespace {

void dispatch(ingest_ptr self);

void on_batch_done(ingest_ptr self, writer_actor writer, write_batch_reply reply) {
  auto& st = self->state;
  auto i = st.in_flight.find(writer.address());
  if (i == st.in_flight.end())
    return;
  auto batch = std::move(i->second);
  st.in_flight.erase(i);
  committed_events committed;
  for (size_t k = 0; k < batch.size(); ++k) {
    auto result = k < reply.results.size()
                    ? reply.results[k]
                    : db::write_result{db::write_outcome::failed, "writer returned no result"};
    if (result.outcome == db::write_outcome::stored)
      committed.items.push_back(batch[k].item);
    batch[k].promise.deliver(ingest_reply{result.outcome, std::move(result.reason)});
  }
  if (st.env.stats && !committed.items.empty()) {
    ++st.env.stats->ingest_batches;
    st.env.stats->ingest_batch_size.observe(static_cast<double>(batch.size()));
    st.env.stats->commit_latency.observe(reply.commit_seconds);
  }
  if (!committed.items.empty())
    self->send(st.hub, std::move(committed));
  st.idle_writers.push_back(std::move(writer));
  dispatch(self);
}

void dispatch(ingest_ptr self) {
  auto& st = self->state;
  while (!st.queue.empty() && !st.idle_writers.empty()) {
    auto now = st.env.steady_now();
    if (st.should_hold(now)) {
      if (!st.hold_armed) {
        st.hold_armed = true;
        auto due = st.queue.front().queued_at + st.settings.commit_delay;
        self->delayed_send(self, due - now, ingest_tick{});
      }
      return;
    }
    auto writer = std::move(st.idle_writers.back());
    st.idle_writers.pop_back();
    auto n = std::min(st.queue.size(), st.settings.max_batch);
    auto& batch = st.in_flight[writer.address()];
    write_batch_request req;
    req.items.reserve(n);
    batch.reserve(n);
    for (size_t k = 0; k < n; ++k) {
      req.items.push_back(st.queue.front().item);
      batch.push_back(std::move(st.queue.front()));
      st.queue.pop_front();
    }
    // No timeout: a batch ends in a reply or in the writer's death (exit
    // handler below); a timeout could not tell us whether it committed.
    self->request(writer, caf::infinite, std::move(req))
      .then(
        [self, writer](write_batch_reply& reply) {
          trace_reply_in(self->state.env, self->current_sender(), reply);
          on_batch_done(self, writer, std::move(reply));
        },
            [](caf::error&) { /* the exit handler answers the batch */ });
  }
}

}  // namespace

ingest_actor::behavior_type ingest_actor_impl(ingest_ptr self, ingest_settings settings,
                                              std::vector<writer_actor> writers, hub_actor hub,
                                              node_env env) {
  auto& st = self->state;
  st.settings = settings;
  st.env = std::move(env);
  st.hub = std::move(hub);
  st.all_writers = writers;
  st.idle_writers = std::move(writers);
  // A dead writer takes ingest down with it (and the supervisor restarts
  // both): in-flight outcomes are unknown, so nothing may be half-alive.
  for (auto& w : st.idle_writers)
    self->link_to(w);
  self->set_exit_handler([self](const caf::exit_msg& msg) {
    if (msg.reason != caf::exit_reason::user_shutdown)
      log::error("ingest", "writer session died; failing in-flight events",
                 {{"reason", caf::to_string(msg.reason)}});
    self->state.fail_everything("writer session failed");
    self->quit(msg.reason);
  });
  return {
    [self](ingest_request& req) -> caf::typed_response_promise<ingest_reply> {
      auto& st = self->state;
      // Which event, in ingest's own order of events and replies: batches
      // depend on it, so a replay hands ingest its requests in this order.
      if (st.env.trace && st.env.trace->node_level()) {
        auto& from = self->current_sender();
        st.env.trace->record(
          st.env.actor, "ingest_in",
          trace_fields{}
            .str("from", from ? st.env.trace->name_of(from->address()) : std::string{})
            .str("id", req.ev ? req.ev->id : std::string{}));
      }
      auto promise = self->make_response_promise<ingest_reply>();
      if (st.queue.size() >= st.settings.max_queue) {
        promise.deliver(ingest_reply{db::write_outcome::failed, "ingest queue full, retry later"});
        return promise;
      }
      auto now = self->state.env.steady_now();
      if (req.ev)
        st.note_arrival(req.ev->pubkey, now);
      st.queue.push_back({db::ingest_item{req.community_id, std::move(req.ev)}, promise, now});
      dispatch(self);
      return promise;
    },
    [self](ingest_tick tick) {
      trace_node_message(self->state.env, "timer", tick);
      self->state.hold_armed = false;
      dispatch(self);
    },
    // Start-up: every writer connection probes the roster fence; the first
    // failure is the answer.
    [self](fence_probe_request) -> caf::typed_response_promise<fence_probe_reply> {
      auto promise = self->make_response_promise<fence_probe_reply>();
      auto& writers = self->state.all_writers;
      auto left = std::make_shared<size_t>(writers.size());
      auto first_error = std::make_shared<status>();
      if (writers.empty())
        promise.deliver(fence_probe_reply{{ec::internal, "no writer sessions"}});
      for (auto& w : writers)
        self->request(w, caf::infinite, fence_probe_request{})
          .then(
            [promise, left, first_error](fence_probe_reply& reply) mutable {
              if (!reply.err.ok() && first_error->ok())
                *first_error = reply.err;
              if (--*left == 0)
                promise.deliver(fence_probe_reply{*first_error});
            },
            [promise, left, first_error](caf::error& err) mutable {
              if (first_error->ok())
                *first_error = {ec::unavailable, caf::to_string(err)};
              if (--*left == 0)
                promise.deliver(fence_probe_reply{*first_error});
            });
      return promise;
    },
  };
}

}  // namespace waggle
