#include "actors/ingest_actor.hpp"

#include "actors/log.hpp"

namespace waggle {

namespace {

void dispatch(ingest_ptr self);

void on_batch_done(ingest_ptr self, writer_actor writer, std::vector<ingest_state::pending> batch,
                   write_batch_reply reply) {
  auto& st = self->state;
  committed_events committed;
  for (size_t i = 0; i < batch.size(); ++i) {
    auto result = i < reply.results.size()
                    ? reply.results[i]
                    : db::write_result{db::write_outcome::failed, "writer returned no result"};
    if (result.outcome == db::write_outcome::stored)
      committed.items.push_back(batch[i].item);
    batch[i].promise.deliver(ingest_reply{result.outcome, std::move(result.reason)});
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
    auto writer = std::move(st.idle_writers.back());
    st.idle_writers.pop_back();
    auto n = std::min(st.queue.size(), st.settings.max_batch);
    std::vector<ingest_state::pending> batch;
    batch.reserve(n);
    write_batch_request req;
    req.items.reserve(n);
    for (size_t i = 0; i < n; ++i) {
      req.items.push_back(st.queue.front().item);
      batch.push_back(std::move(st.queue.front()));
      st.queue.pop_front();
    }
    self->request(writer, caf::infinite, std::move(req))
      .then(
        [self, writer, batch](write_batch_reply& reply) mutable {
          on_batch_done(self, writer, std::move(batch), std::move(reply));
        },
        [self, writer, batch](caf::error& err) mutable {
          // The writer died mid-batch: the commit outcome is unknown, so
          // every sender hears "failed" (never a false OK). Ingest then
          // fails what is queued and exits, and the node supervisor restarts
          // it with fresh writer sessions.
          log::error("ingest", "writer session failed", {{"error", caf::to_string(err)}});
          for (auto& p : batch)
            p.promise.deliver(ingest_reply{db::write_outcome::failed, "writer session failed"});
          for (auto& p : self->state.queue)
            p.promise.deliver(ingest_reply{db::write_outcome::failed, "writer session failed"});
          self->state.queue.clear();
          (void) writer;
          self->quit(err);
        });
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
  st.idle_writers = std::move(writers);
  // A dead writer takes ingest down with it (and the supervisor restarts
  // both): in-flight outcomes are unknown, so nothing may be half-alive.
  for (auto& w : st.idle_writers)
    self->link_to(w);
  return {
    [self](ingest_request& req) -> caf::typed_response_promise<ingest_reply> {
      auto& st = self->state;
      auto promise = self->make_response_promise<ingest_reply>();
      if (st.queue.size() >= st.settings.max_queue) {
        promise.deliver(ingest_reply{db::write_outcome::failed, "ingest queue full, retry later"});
        return promise;
      }
      st.queue.push_back({db::ingest_item{req.community_id, std::move(req.ev)}, promise});
      dispatch(self);
      return promise;
    },
  };
}

}  // namespace waggle
