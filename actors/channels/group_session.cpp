#include "actors/channels/group_session.hpp"

#include <pqxx/except>

#include "actors/support/log.hpp"
#include "actors/trace/trace_recorder.hpp"
#include "db/roster_fence.hpp"

namespace waggle {

std::string group_session_name(size_t index) {
  // The first keeps the name it had when there was one, so older traces replay.
  return index == 0 ? "group_session" : "group_session-" + std::to_string(index);
}

void group_session_state::init(group_session_ptr self_ptr, std::string database_url,
                               db::relay_signer relay_signer, node_env e, std::string name) {
  self = self_ptr;
  env = e.for_actor(name);
  session = std::make_unique<db::session>(std::move(database_url), "group",
                                          std::vector<std::string>{}, log::session_report);
  signer = std::move(relay_signer);
}

// Runs `fn` on the live connection; a broken connection resets the session
// and reports ec::unavailable, anything else ec::internal (logged). A
// deadlock or serialization failure rolled the whole transaction back, so
// it runs again (each function here is one transaction, safe to repeat).
template <class Fn>
status group_session_state::with_connection(const char* what, Fn&& fn) {
  constexpr int attempts = 4;
  for (int attempt = 1;; ++attempt) {
    auto* conn = session->get();
    if (!conn)
      return {ec::unavailable, "database unavailable"};
    try {
      fn(*conn);
      return {};
    } catch (const pqxx::broken_connection&) {
      session->reset();
      return {ec::unavailable, "database unavailable"};
    } catch (const pqxx::in_doubt_error&) {
      session->reset();
      return {ec::unavailable, "database unavailable (commit outcome unknown)"};
    } catch (const pqxx::transaction_rollback& e) {
      if (attempt < attempts)
        continue;
      log::warn("group_session", what,
                {{"error", e.what()}, {"attempts", std::to_string(attempt)}});
      return {ec::unavailable, "database busy (deadlock or serialization failure), retry"};
    } catch (const pqxx::sql_error& e) {
      auto state = e.sqlstate();
      if (state == "40001" || state == "40P01") {
        if (attempt < attempts)
          continue;
        return {ec::unavailable, "database busy (deadlock or serialization failure), retry"};
      }
      if (state.rfind("22", 0) == 0 || state.rfind("23", 0) == 0)
        return {ec::invalid, "the database refused this command (SQLSTATE " + state + ")"};
      log::error("group_session", what, {{"error", e.what()}, {"sqlstate", state}});
      return {ec::unavailable, "database error"};
    } catch (const std::exception& e) {
      if (!conn->is_open())
        session->reset();
      log::error("group_session", what, {{"error", e.what()}});
      return {ec::internal, "internal error"};
    }
  }
}

group_command_reply group_session_state::on_command(const group_command_request& req) {
  group_command_reply reply;
  auto st = with_connection("command failed", [&](pqxx::connection& conn) {
    auto out = db::apply_group_command(conn, req.community_id, req.ev);
    reply.result = std::move(out.result);
    reply.change = std::move(out.change);
  });
  if (!st.ok()) {
    reply.result = {st.code == ec::invalid ? write_outcome::rejected : write_outcome::failed,
                    st.reason};
    reply.change = {};
  }
  return reply;
}

roster_publish_reply group_session_state::on_publish(const roster_publish_request& req) {
  roster_publish_reply reply;
  reply.err = with_connection("roster publication failed", [&](pqxx::connection& conn) {
    auto out = db::publish_roster(conn, req.community_id, req.channel, signer, req.now);
    reply.events = std::move(out.events);
  });
  return reply;
}

roster_repair_reply group_session_state::on_repair(const roster_repair_request& req) {
  roster_repair_reply reply;
  reply.err = with_connection("roster repair failed", [&](pqxx::connection& conn) {
    reply.repaired = 0;  // a retried attempt starts over
    reply.events.clear();
    for (auto& [community_id, channel] : db::stale_rosters(conn, signer.pubkey)) {
      auto out = db::publish_roster(conn, community_id, channel, signer, req.now);
      log::warn("group_session", "repaired a stale roster snapshot",
                {{"community", std::to_string(community_id)}, {"channel", channel},
                 {"members", std::to_string(out.members.size())}});
      ++reply.repaired;
      for (auto& ev : out.events)
        reply.events.push_back({community_id, std::move(ev)});
    }
  });
  return reply;
}

fence_probe_reply group_session_state::on_fence_probe() {
  fence_probe_reply reply;
  auto st = with_connection("fence probe failed", [&](pqxx::connection& conn) {
    reply.err = db::check_roster_fence(conn);
  });
  if (!st.ok())
    reply.err = st;
  return reply;
}

group_session_actor::behavior_type group_session_actor_impl(group_session_ptr self,
                                                            std::string database_url,
                                                            db::relay_signer signer, node_env env,
                                                            std::string name) {
  // Names the session for traces: a replay learns its handle from this.
  if (env.trace)
    env.trace->spawned(name, caf::actor_cast<caf::actor>(self));
  self->state.init(self, std::move(database_url), std::move(signer), std::move(env),
                   std::move(name));
  return {
    // -- database exchanges -----------------------------------------------------
    [self](group_command_request& req) -> group_command_reply {
      return traced_exchange(self->state.env, req, [&] { return self->state.on_command(req); });
    },
    [self](roster_publish_request& req) -> roster_publish_reply {
      return traced_exchange(self->state.env, req, [&] { return self->state.on_publish(req); });
    },
    [self](roster_repair_request& req) -> roster_repair_reply {
      return traced_exchange(self->state.env, req, [&] { return self->state.on_repair(req); });
    },
    [self](fence_probe_request req) -> fence_probe_reply {
      return traced_exchange(self->state.env, req, [&] { return self->state.on_fence_probe(); });
    },
  };
}

}  // namespace waggle
