#include "actors/delivery/delivery_store.hpp"

#include <pqxx/except>

#include "actors/support/log.hpp"
#include "actors/trace/trace_recorder.hpp"

namespace waggle {

namespace {
// Far below the supervisor's store_timeout (30 s): a claim slow enough to
// miss the supervisor's wait is cancelled and rolls back instead of
// committing rows nobody will send until their lease runs out.
constexpr const char* store_statement_timeout = "SET statement_timeout = 5000";
}  // namespace

void delivery_store_state::init(delivery_store_ptr self_ptr, std::string database_url,
                                std::string role, std::shared_ptr<delivery_source> s,
                                node_env e) {
  self = self_ptr;
  std::vector<std::string> setup{store_statement_timeout};
  for (auto& statement : s->session_setup())
    setup.push_back(std::move(statement));
  session = std::make_unique<db::session>(std::move(database_url), std::move(role),
                                          std::move(setup), log::session_report);
  source = std::move(s);
  env = std::move(e);
}

delivery_claim_reply delivery_store_state::on_claim(const delivery_claim_request& req) {
  delivery_claim_reply reply;
  auto* conn = session->get();
  if (!conn) {
    reply.failed = true;
    return reply;
  }
  try {
    reply = source->claim(*conn, req);
  } catch (const pqxx::broken_connection&) {
    session->reset();
    reply = {};
    reply.failed = true;
  } catch (const std::exception& e) {
    log::error("delivery_store", "claim failed", {{"error", e.what()}});
    reply = {};
    reply.failed = true;
  }
  return reply;
}

delivery_complete_reply delivery_store_state::on_complete(const delivery_complete_request& req) {
  delivery_complete_reply reply;
  auto* conn = session->get();
  if (!conn) {
    // The claim's lease runs out and the row is claimed again: at least once.
    reply.result = delivery_completion::failed;
    return reply;
  }
  try {
    reply.result = source->complete(*conn, req);
  } catch (const pqxx::broken_connection&) {
    session->reset();
    reply.result = delivery_completion::failed;
  } catch (const std::exception& e) {
    log::error("delivery_store", "completion failed",
               {{"row", std::to_string(req.job.row_id)}, {"error", e.what()}});
    reply.result = delivery_completion::failed;
  }
  return reply;
}

delivery_complete_batch_reply
delivery_store_state::on_complete_batch(const delivery_complete_batch& req) {
  delivery_complete_batch_reply reply;
  reply.results.assign(req.requests.size(), delivery_complete_reply{delivery_completion::failed});
  auto* conn = session->get();
  if (!conn)
    return reply;  // the claims' leases run out: sent again, at least once
  try {
    auto results = source->complete_batch(*conn, req.requests);
    for (size_t i = 0; i < results.size() && i < reply.results.size(); ++i)
      reply.results[i].result = results[i];
  } catch (const pqxx::broken_connection&) {
    session->reset();
  } catch (const std::exception& e) {
    log::error("delivery_store", "completions failed",
               {{"rows", std::to_string(req.requests.size())}, {"error", e.what()}});
  }
  return reply;
}

delivery_store_actor::behavior_type
delivery_store_actor_impl(delivery_store_ptr self, std::string database_url, std::string role,
                          std::shared_ptr<delivery_source> source, node_env env) {
  self->state.init(self, std::move(database_url), std::move(role), std::move(source),
                   std::move(env));
  return {
    // Recorded like a database session's exchanges (db_request, db_reply):
    // a replay puts a stand-in here that answers from the trace.
    [self](const delivery_claim_request& req) {
      return traced_exchange(self->state.env, req, [&] { return self->state.on_claim(req); });
    },
    [self](const delivery_complete_request& req) {
      return traced_exchange(self->state.env, req, [&] { return self->state.on_complete(req); });
    },
    [self](const delivery_complete_batch& req) {
      return traced_exchange(self->state.env, req,
                             [&] { return self->state.on_complete_batch(req); });
    },
  };
}

}  // namespace waggle
