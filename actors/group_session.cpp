#include "actors/group_session.hpp"

#include <pqxx/except>

#include "actors/log.hpp"
#include "actors/trace_recorder.hpp"
#include "db/roster_fence.hpp"

namespace waggle {

namespace {

using self_ptr = group_session_actor::stateful_pointer<group_session_state>;

// Runs `fn` on the live connection; a broken connection resets the session
// and reports ec::unavailable, anything else ec::internal (logged). A
// deadlock or serialization failure rolled the whole transaction back, so
// it runs again (each function here is one transaction, safe to repeat).
template <class Fn>
status with_connection(self_ptr self, const char* what, Fn&& fn) {
  constexpr int attempts = 4;
  for (int attempt = 1;; ++attempt) {
    auto* conn = self->state.session->get();
    if (!conn)
      return {ec::unavailable, "database unavailable"};
    try {
      fn(*conn);
      return {};
    } catch (const pqxx::broken_connection&) {
      self->state.session->reset();
      return {ec::unavailable, "database unavailable"};
    } catch (const pqxx::in_doubt_error&) {
      self->state.session->reset();
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
        self->state.session->reset();
      log::error("group_session", what, {{"error", e.what()}});
      return {ec::internal, "internal error"};
    }
  }
}

}  // namespace

group_session_actor::behavior_type
group_session_impl(group_session_actor::stateful_pointer<group_session_state> self,
                   std::string database_url, db::relay_signer signer, node_env env) {
  self->state.env = env.for_actor("group_session");
  if (env.trace)
    env.trace->spawned("group_session", caf::actor_cast<caf::actor>(self));
  self->state.session = std::make_unique<db_session>(std::move(database_url), "group");
  self->state.signer = std::move(signer);
  return {
    [self](group_command_request& req) -> group_command_reply {
      return traced_exchange(self->state.env, req, [&] {
        group_command_reply reply;
        auto st = with_connection(self, "command failed", [&](pqxx::connection& conn) {
          auto out = db::apply_group_command(conn, req.community_id, req.ev);
          reply.result = std::move(out.result);
          reply.change = std::move(out.change);
        });
        if (!st.ok()) {
          reply.result = {st.code == ec::invalid ? db::write_outcome::rejected
                                                 : db::write_outcome::failed,
                          st.reason};
          reply.change = {};
        }
        return reply;
      });
    },
    [self](roster_publish_request& req) -> roster_publish_reply {
      return traced_exchange(self->state.env, req, [&] {
        roster_publish_reply reply;
        reply.err = with_connection(self, "roster publication failed", [&](pqxx::connection& conn) {
          auto out = db::publish_roster(conn, req.community_id, req.channel, self->state.signer,
                                        req.now);
          reply.events = std::move(out.events);
        });
        return reply;
      });
    },
    [self](roster_repair_request& req) -> roster_repair_reply {
      return traced_exchange(self->state.env, req, [&] {
        roster_repair_reply reply;
        reply.err = with_connection(self, "roster repair failed", [&](pqxx::connection& conn) {
          reply.repaired = 0;  // a retried attempt starts over
          reply.events.clear();
          for (auto& [community_id, channel] : db::stale_rosters(conn, self->state.signer.pubkey)) {
            auto out = db::publish_roster(conn, community_id, channel, self->state.signer, req.now);
            log::warn("group_session", "repaired a stale roster snapshot",
                      {{"community", std::to_string(community_id)}, {"channel", channel},
                       {"members", std::to_string(out.members.size())}});
            ++reply.repaired;
            for (auto& ev : out.events)
              reply.events.push_back({community_id, std::move(ev)});
          }
        });
        return reply;
      });
    },
    [self](fence_probe_request req) -> fence_probe_reply {
      return traced_exchange(self->state.env, req, [&] {
        fence_probe_reply reply;
        auto st = with_connection(self, "fence probe failed", [&](pqxx::connection& conn) {
          reply.err = db::check_roster_fence(conn);
        });
        if (!st.ok())
          reply.err = st;
        return reply;
      });
    },
  };
}

}  // namespace waggle
