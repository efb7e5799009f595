#include "actors/writer_session.hpp"

#include <chrono>

#include <pqxx/except>

#include "actors/log.hpp"
#include "db/roster_fence.hpp"

namespace waggle {

writer_actor::behavior_type writer_session_impl(writer_actor::stateful_pointer<writer_state> self,
                                                std::string database_url, std::string role) {
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
      reply.commit_seconds
        = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
      return reply;
    },
    // Start-up: the roster fence must work on the connections that write.
    [self](fence_probe_request) -> fence_probe_reply {
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
    },
  };
}

}  // namespace waggle
