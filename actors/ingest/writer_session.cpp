#include "actors/ingest/writer_session.hpp"

#include <chrono>

#include <pqxx/except>

#include "actors/support/log.hpp"
#include "actors/trace/trace_recorder.hpp"
#include "db/batch_bisect.hpp"
#include "db/event_store.hpp"
#include "db/roster_fence.hpp"
#include "db/statistics.hpp"

namespace waggle {

void writer_session_state::init(writer_session_ptr self_ptr, std::string database_url,
                                std::string role, node_env e, db::lease_settings l) {
  self = self_ptr;
  env = e.for_actor(role);
  leases = l;
  // Generic plans, kept, and no sequential scans: db/statistics.hpp says why.
  session = std::make_unique<db::session>(std::move(database_url), std::move(role),
                                          db::writer_session_settings(), log::session_report);
}

write_batch_reply writer_session_state::on_write_batch(const write_batch_request& req) {
  write_batch_reply reply;
  auto* conn = session->get();
  if (!conn) {
    reply.results.assign(req.items.size(),
                         write_result{write_outcome::failed, "database unavailable"});
    return reply;
  }
  auto started = std::chrono::steady_clock::now();
  try {
    if (req.lease) {
      reply.results.push_back(db::accept_lease_event(*conn, req.items.at(0), {}, leases,
                                                     req.push_skipped, env.unix_now()));
    } else {
      db::write_options opts;
      if (!req.push_gate_all)
        opts.push_gated = req.push_gated;
      reply.results = db::write_batch_bisecting(*conn, req.items, opts);
    }
  } catch (const db::batch_unavailable& e) {
    // Halves that committed before the connection broke keep their real
    // outcome (so they are answered OK and fanned out); the rest failed.
    session->reset();
    reply.results = e.results();
  } catch (const pqxx::broken_connection&) {
    session->reset();
    reply.results.assign(req.items.size(),
                         write_result{write_outcome::failed, "database unavailable"});
  } catch (const std::exception& e) {
    log::error("writer", "batch failed", {{"error", e.what()}});
    reply.results.assign(req.items.size(),
                         write_result{write_outcome::failed, "internal error"});
  }
  // Metrics only (the commit-latency histogram), so a real clock is fine.
  reply.commit_seconds
    = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  return reply;
}

fence_probe_reply writer_session_state::on_fence_probe() {
  auto* conn = session->get();
  if (!conn)
    return {{ec::unavailable, "database unavailable"}};
  try {
    return {db::check_roster_fence(*conn)};
  } catch (const pqxx::broken_connection&) {
    session->reset();
    return {{ec::unavailable, "database unavailable"}};
  } catch (const std::exception& e) {
    return {{ec::internal, std::string{"fence probe failed: "} + e.what()}};
  }
}

writer_session_actor::behavior_type writer_session_actor_impl(writer_session_ptr self,
                                                              std::string database_url,
                                                              std::string role, node_env env,
                                                              db::lease_settings leases) {
  // So trace records can name this session as the sender of its replies.
  if (env.trace)
    env.trace->spawned(role, caf::actor_cast<caf::actor>(self));
  self->state.init(self, std::move(database_url), std::move(role), std::move(env), leases);
  return {
    // -- requests ---------------------------------------------------------------
    [self](write_batch_request& req) -> write_batch_reply {
      return traced_exchange(self->state.env, req, [&] { return self->state.on_write_batch(req); });
    },
    // Start-up: the roster fence must work on the connections that write.
    [self](fence_probe_request req) -> fence_probe_reply {
      return traced_exchange(self->state.env, req, [&] { return self->state.on_fence_probe(); });
    },
  };
}

}  // namespace waggle
