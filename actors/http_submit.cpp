#include "actors/http_submit.hpp"

#include "messages/proto/nip29.hpp"

namespace waggle {

caf::behavior http_submit_impl(caf::event_based_actor* self, http_submit_context ctx) {
  return {
    [self, ctx](socket_frame& frame) {
      auto& env = ctx.env;
      auto finish = [self, done = ctx.done](gateway::http_event_reply reply) {
        done(std::move(reply));
        self->quit();
      };
      auto parsed = proto::parse_event(frame.text);
      if (!parsed)
        return finish({"", false, parsed.error().message()});
      auto ev = std::make_shared<const proto::event>(std::move(*parsed));
      namespace nip29 = proto::nip29;
      auto channel = nip29::channel_of(*ev);
      auto st = admit_event(*ev, {ctx.auth_pubkey}, env.unix_now(), ctx.policy);
      if (st.ok() && !channel)
        st = channel.error();
      if (st.ok() && nip29::is_group_state(ev->kind) && ev->pubkey != ctx.relay_pubkey)
        st = {ec::restricted, "group state (kinds 39000-39003) is signed by the relay"};
      if (st.ok() && proto::is_ephemeral(ev->kind) && channel && *channel)
        st = {ec::restricted, "ephemeral channel events are accepted over WebSocket only"};
      if (!st.ok()) {
        if (env.stats)
          env.stats->count_rejected(std::string{prefix_of(st.code)});
        return finish({ev->id, false, st.message()});
      }
      if (proto::is_ephemeral(ev->kind)) {
        self->send(ctx.hub, committed_events{{db::ingest_item{ctx.community_id, ev}}});
        return finish({ev->id, true, ""});
      }
      auto on_reply = [finish, ev, stats = env.stats](ingest_reply& reply) {
        auto answer = answer_for(reply.outcome, reply.reason);
        if (stats && reply.outcome == db::write_outcome::stored)
          ++stats->events_accepted;
        finish({ev->id, answer.accepted, answer.message});
      };
      // The outcome is unknown on an error: never claim success.
      if (nip29::is_group_command(ev->kind))
        self->request(ctx.group, std::chrono::seconds(30), group_request{ctx.community_id, ev})
          .then(on_reply, [finish, ev](caf::error&) {
            finish({ev->id, false, "error: group actor unavailable"});
          });
      else
        self->request(ctx.ingest, std::chrono::seconds(30), ingest_request{ctx.community_id, ev})
          .then(on_reply, [finish, ev](caf::error&) {
            finish({ev->id, false, "error: ingest unavailable"});
          });
    },
  };
}

}  // namespace waggle
