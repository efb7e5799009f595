#include "actors/writer_session.hpp"

#include <chrono>

#include <pqxx/except>

#include "actors/log.hpp"
#include "actors/trace_recorder.hpp"
#include "db/roster_fence.hpp"

namespace waggle {

namespace {

using self_ptr = writer_actor::stateful_pointer<writer_state>;

write_batch_reply write_batch(self_ptr self, const write_batch_request& req) {
  write_batch_reply reply;
  auto* conn = self->state.session->get();
  if (!conn) {
    reply.results.assign(req.items.size(),
                         db::write_result{db::write_outcome::failed, "database unavailable"});
    return reply;
  }
  auto started = std::chrono::steady_clock::now();
  try {
    reply.results = db::write_batch_bisecting(*conn, req.items);
  } catch (const db::batch_unavailable& e) {
    // Halves that committed before the connection broke keep their real
    // outcome (so they are answered OK and fanned out); the rest failed.
    self->state.session->reset();
    reply.results = e.results();
  } catch (const pqxx::broken_connection&) {
    self->state.session->reset();
    reply.results.assign(req.items.size(),
                         db::write_result{db::write_outcome::failed, "database unavailable"});
  } catch (const std::exception& e) {
    log::error("writer", "batch failed", {{"error", e.what()}});
    reply.results.assign(req.items.size(),
                         db::write_result{db::write_outcome::failed, "internal error"});
  }
  // Metrics only (the commit-latency histogram), so a real clock is fine.
  reply.commit_seconds
    = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  return reply;
}

fence_probe_reply probe_fence(self_ptr self) {
  auto* conn = self->state.session->get();
  if (!conn)
    return {{ec::unavailable, "database unavailable"}};
  try {
    return {db::check_roster_fence(*conn)};
  } catch (const pqxx::broken_connection&) {
    self->state.session->reset();
    return {{ec::unavailable, "database unavailable"}};
  } catch (const std::exception& e) {
    return {{ec::internal, std::string{"fence probe failed: "} + e.what()}};
  }
}

}  // namespace

writer_actor::behavior_type writer_session_impl(self_ptr self, std::string database_url,
                                                std::string role, node_env env) {
  self->state.env = env.for_actor(role);
  if (env.trace)
    env.trace->spawned(role, caf::actor_cast<caf::actor>(self));
  // The batch statements are prepared once per connection and their shape
  // does not depend on the values (arrays of the batch's rows, index probes
  // forced by OFFSET 0): a generic plan is right for every batch, and
  // re-planning custom ones cost a fifth of PostgreSQL's CPU under load
  // (docs/benchmarks.md, "Profile").
  self->state.session = std::make_unique<db_session>(
    std::move(database_url), std::move(role),
    std::vector<std::string>{"SET plan_cache_mode = force_generic_plan"});
  return {
    [self](write_batch_request& req) -> write_batch_reply {
      return traced_exchange(self->state.env, req, [&] { return write_batch(self, req); });
    },
    // Start-up: the roster fence must work on the connections that write.
    [self](fence_probe_request req) -> fence_probe_reply {
      return traced_exchange(self->state.env, req, [&] { return probe_fence(self); });
    },
  };
}

}  // namespace waggle
