#include "actors/roster_actor.hpp"

#include <algorithm>

#include "actors/log.hpp"
#include "actors/trace_recorder.hpp"

namespace waggle {

namespace {

using self_ptr = roster_actor::stateful_pointer<roster_state>;

void publish(self_ptr self) {
  auto& st = self->state;
  st.in_flight = true;
  st.dirty = false;
  auto done = [self](bool ok) {
    auto& st = self->state;
    st.in_flight = false;
    if (!ok) {
      // Retry the whole publication: it captures the roster afresh.
      auto delay = std::chrono::milliseconds(std::min(100 << std::min(st.failures++, 6), 5000));
      self->delayed_send(self, delay, roster_dirty{true});
      return;
    }
    st.failures = 0;
    if (st.dirty)
      publish(self);
  };
  self
    ->request(st.session, caf::infinite,
              roster_publish_request{st.community_id, st.channel, st.env.unix_now()})
    .then(
      [self, done](roster_publish_reply& reply) {
        auto& st = self->state;
        trace_reply_in(st.env, self->current_sender(), reply);
        if (!reply.err.ok()) {
          log::warn("roster", "publication failed; retrying",
                    {{"community", std::to_string(st.community_id)}, {"channel", st.channel},
                     {"error", reply.err.message()}});
          return done(false);
        }
        if (!reply.events.empty()) {
          committed_events batch;
          for (auto& ev : reply.events)
            batch.items.push_back({st.community_id, std::move(ev)});
          self->send(st.hub, std::move(batch));
        }
        done(true);
      },
      [self, done](caf::error& err) {
        log::warn("roster", "publication failed; retrying",
                  {{"channel", self->state.channel}, {"error", caf::to_string(err)}});
        done(false);
      });
}

}  // namespace

roster_actor::behavior_type roster_actor_impl(roster_actor::stateful_pointer<roster_state> self,
                                              int64_t community_id, std::string channel,
                                              group_session_actor session, hub_actor hub,
                                              node_env env) {
  auto& st = self->state;
  st.community_id = community_id;
  st.channel = std::move(channel);
  st.session = std::move(session);
  st.hub = std::move(hub);
  st.env = std::move(env);
  return {
    [self](roster_dirty msg) {
      auto& st = self->state;
      if (msg.retry)
        trace_node_message(st.env, "timer", msg);
      if (st.in_flight)
        st.dirty = true;
      else
        publish(self);
    },
  };
}

}  // namespace waggle
