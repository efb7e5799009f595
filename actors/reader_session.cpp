#include "actors/reader_session.hpp"

#include <pqxx/except>

#include "actors/log.hpp"

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

}  // namespace

reader_actor::behavior_type reader_session_impl(reader_actor::stateful_pointer<reader_state> self,
                                                std::string database_url, std::string role,
                                                proto::filter_limits limits) {
  self->state.session = std::make_unique<db_session>(std::move(database_url), std::move(role));
  self->state.limits = limits;
  return {
    [self](history_request& req) -> history_reply {
      return run_read<history_reply>(self, [&](pqxx::connection& conn, history_reply& reply) {
        reply.raws = db::query_events(conn, req.community_id, req.filters, self->state.limits);
      });
    },
    [self](count_request& req) -> count_reply {
      return run_read<count_reply>(self, [&](pqxx::connection& conn, count_reply& reply) {
        reply.count = db::count_events(conn, req.community_id, req.filters);
      });
    },
  };
}

reader_actor::behavior_type reader_pool_impl(reader_actor::stateful_pointer<reader_pool_state> self,
                                             std::vector<reader_actor> sessions) {
  self->state.sessions = std::move(sessions);
  for (auto& s : self->state.sessions)
    self->link_to(s);
  auto pick = [self]() -> reader_actor& {
    auto& st = self->state;
    return st.sessions[st.next++ % st.sessions.size()];
  };
  return {
    [self, pick](history_request& req) {
      return self->delegate(pick(), std::move(req));
    },
    [self, pick](count_request& req) {
      return self->delegate(pick(), std::move(req));
    },
  };
}

}  // namespace waggle
