#include "actors/reader_session.hpp"

#include <pqxx/except>

#include "actors/log.hpp"
#include "actors/trace_recorder.hpp"
#include "db/group_store.hpp"

namespace waggle {

namespace {

template <class Reply, class Fn>
Reply run_read(reader_actor::stateful_pointer<reader_state> self, Fn&& fn) {
  Reply reply;
  auto* conn = self->state.session->get();
  if (!conn) {
    reply.err = {ec::unavailable, "database unavailable"};
    return reply;
  }
  try {
    fn(*conn, reply);
  } catch (const pqxx::broken_connection&) {
    self->state.session->reset();
    reply.err = {ec::unavailable, "database unavailable"};
  } catch (const std::exception& e) {
    log::error("reader", "query failed", {{"error", e.what()}});
    reply.err = {ec::internal, "query failed"};
  }
  return reply;
}

// Read access to every channel in `access`, or the refusal of the first one
// that may not be read (proto::nip29::may_read).
access_reply check_access(pqxx::connection& conn, int64_t community_id, const read_access& access) {
  access_reply reply;
  if (access.channels.empty())
    return reply;
  for (auto& a : db::read_channel_access(conn, community_id, access.channels, access.pubkeys)) {
    if (auto st = proto::nip29::may_read(a.view, a.members.size()); !st.ok()) {
      reply.err = {st.code, st.reason + " (" + a.channel + ")"};
      reply.grants.clear();
      return reply;
    }
    reply.grants.push_back({a.channel, a.view.open, std::move(a.members)});
  }
  return reply;
}

history_reply read_history(reader_actor::stateful_pointer<reader_state> self,
                           const history_request& req) {
  return run_read<history_reply>(self, [&](pqxx::connection& conn, history_reply& reply) {
    // Checked again here, after the subscription was registered with the
    // hub: a removal that committed since the first check is seen now, and
    // one that commits later reaches the subscription as a channel_revoked
    // through the hub.
    auto access = check_access(conn, req.community_id, req.access);
    if (!access.err.ok()) {
      reply.err = access.err;
      return;
    }
    reply.grants = std::move(access.grants);
    reply.raws = db::query_events(conn, req.community_id, req.filters, self->state.limits);
  });
}

}  // namespace

reader_actor::behavior_type reader_session_impl(reader_actor::stateful_pointer<reader_state> self,
                                                std::string database_url, std::string role,
                                                proto::filter_limits limits, node_env env) {
  self->state.env = env.for_actor(role);
  if (env.trace)
    env.trace->spawned(role, caf::actor_cast<caf::actor>(self));
  self->state.session = std::make_unique<db_session>(std::move(database_url), std::move(role));
  self->state.limits = limits;
  return {
    [self](history_request& req) -> history_reply {
      return traced_exchange(self->state.env, req, [&] { return read_history(self, req); });
    },
    [self](count_request& req) -> count_reply {
      return traced_exchange(self->state.env, req, [&] {
        return run_read<count_reply>(self, [&](pqxx::connection& conn, count_reply& reply) {
          if (auto access = check_access(conn, req.community_id, req.access); !access.err.ok()) {
            reply.err = access.err;
            return;
          }
          reply.count = db::count_events(conn, req.community_id, req.filters);
        });
      });
    },
    [self](access_request& req) -> access_reply {
      return traced_exchange(self->state.env, req, [&] {
        access_reply out;
        auto fallback = run_read<access_reply>(self, [&](pqxx::connection& conn, access_reply&) {
          out = check_access(conn, req.community_id, req.access);
        });
        return fallback.err.ok() ? out : fallback;
      });
    },
  };
}

reader_actor::behavior_type reader_pool_impl(reader_actor::stateful_pointer<reader_pool_state> self,
                                             std::vector<reader_actor> sessions, node_env env) {
  self->state.sessions = std::move(sessions);
  self->state.env = std::move(env);
  for (auto& s : self->state.sessions)
    self->link_to(s);
  auto pick = [self]() -> reader_actor& {
    auto& st = self->state;
    return st.sessions[st.next++ % st.sessions.size()];
  };
  return {
    [self, pick](history_request& req) {
      trace_reader_in(self->state.env, self->current_sender(), req);
      return self->delegate(pick(), std::move(req));
    },
    [self, pick](count_request& req) {
      trace_reader_in(self->state.env, self->current_sender(), req);
      return self->delegate(pick(), std::move(req));
    },
    [self, pick](access_request& req) {
      trace_reader_in(self->state.env, self->current_sender(), req);
      return self->delegate(pick(), std::move(req));
    },
  };
}

}  // namespace waggle
