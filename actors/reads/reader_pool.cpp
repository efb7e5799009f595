#include "actors/reads/reader_pool.hpp"

#include "actors/trace/trace_recorder.hpp"

namespace waggle {

void reader_pool_state::init(reader_pool_ptr self_ptr, std::vector<reader_session_actor> all,
                             node_env e) {
  self = self_ptr;
  sessions = std::move(all);
  env = std::move(e);
  for (auto& s : sessions)
    self->link_to(s);
}

reader_session_actor& reader_pool_state::pick() {
  return sessions[next++ % sessions.size()];
}

reader_pool_actor::behavior_type reader_pool_impl(reader_pool_ptr self,
                                                  std::vector<reader_session_actor> sessions,
                                                  node_env env) {
  self->state.init(self, std::move(sessions), std::move(env));
  // Each read is recorded as the pool takes it, then delegated: the session
  // answers the connection directly.
  return {
    // -- reads ------------------------------------------------------------------
    [self](history_request& req) {
      trace_reader_in(self->state.env, self->current_sender(), req);
      return self->delegate(self->state.pick(), std::move(req));
    },
    [self](count_request& req) {
      trace_reader_in(self->state.env, self->current_sender(), req);
      return self->delegate(self->state.pick(), std::move(req));
    },
    [self](access_request& req) {
      trace_reader_in(self->state.env, self->current_sender(), req);
      return self->delegate(self->state.pick(), std::move(req));
    },
  };
}

}  // namespace waggle
