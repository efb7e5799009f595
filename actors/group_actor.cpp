#include "actors/group_actor.hpp"

#include "actors/log.hpp"
#include "actors/trace_recorder.hpp"
#include "actors/roster_actor.hpp"
#include "actors/ttl_reaper.hpp"
#include "messages/proto/nip29.hpp"

namespace waggle {

namespace {

using self_ptr = group_actor::stateful_pointer<group_state>;

roster_actor& roster_for(self_ptr self, int64_t community_id, const std::string& channel) {
  auto& st = self->state;
  auto key = std::make_pair(community_id, channel);
  auto i = st.rosters.find(key);
  if (i == st.rosters.end()) {
    auto name = "roster:" + std::to_string(community_id) + ":" + channel;
    auto roster = self->spawn<caf::linked>(roster_actor_impl, community_id, channel, st.session,
                                           st.hub, st.env.for_actor(name));
    if (st.env.trace)
      st.env.trace->spawned(name, caf::actor_cast<caf::actor>(roster));
    i = st.rosters.emplace(key, std::move(roster)).first;
  }
  return i->second;
}

void after_commit(self_ptr self, int64_t community_id, const event_ptr& ev,
                  const db::group_change& change) {
  auto& st = self->state;
  self->send(st.hub, committed_events{{db::ingest_item{community_id, ev}}});
  for (const auto& pk : change.removed)
    self->send(st.hub, channel_revoked{community_id, change.channel, pk, false});
  if (change.deleted)
    self->send(st.hub, channel_revoked{community_id, change.channel, "", true});
  else if (change.became_private)
    self->send(st.hub, channel_revoked{community_id, change.channel, "", false});
  if (change.any())
    self->send(roster_for(self, community_id, change.channel), roster_dirty{});
}

// A command whose outcome we cannot trust to describe what committed: a
// duplicate (its first copy committed, but whoever sent that may never have
// heard, e.g. after an in-doubt COMMIT or a restart of this actor) or a
// failure (it may have committed). Fail closed: revoke whatever access the
// command could have ended, and republish the channel's state from the
// database. A revocation that turns out unnecessary only makes a client
// send its REQ again.
void after_uncertain(self_ptr self, int64_t community_id, const event_ptr& ev) {
  namespace nip29 = proto::nip29;
  auto cmd = nip29::parse_group_command(*ev);
  if (!cmd)
    return;
  auto& st = self->state;
  switch (cmd->kind) {
    case nip29::kind_remove_user:
      for (const auto& u : cmd->users)
        self->send(st.hub, channel_revoked{community_id, cmd->group, u.pubkey, false});
      break;
    case nip29::kind_leave_request:
      self->send(st.hub, channel_revoked{community_id, cmd->group, ev->pubkey, false});
      break;
    case nip29::kind_delete_group:
      self->send(st.hub, channel_revoked{community_id, cmd->group, "", true});
      break;
    case nip29::kind_edit_metadata:
      if (cmd->is_private.value_or(false))
        self->send(st.hub, channel_revoked{community_id, cmd->group, "", false});
      break;
    default:
      break;
  }
  self->send(roster_for(self, community_id, cmd->group), roster_dirty{});
}

}  // namespace

group_actor::behavior_type group_actor_impl(group_actor::stateful_pointer<group_state> self,
                                            group_session_actor session, hub_actor hub,
                                            node_env env, std::string database_url,
                                            caf::timespan reap_interval, bool repair_on_start) {
  auto& st = self->state;
  st.session = std::move(session);
  st.hub = std::move(hub);
  st.env = std::move(env);
  self->link_to(st.session);
  if (!database_url.empty())
    st.reaper = self->spawn<caf::detached + caf::linked>(
      ttl_reaper_impl, std::move(database_url), caf::actor_cast<group_actor>(self), reap_interval);
  if (repair_on_start)
    // A restart lost the roster actors' pending publications (and maybe a
    // command's effects between its COMMIT and our reply): republish every
    // roster that differs from the membership.
    self->request(st.session, caf::infinite, roster_repair_request{st.env.unix_now()})
      .then(
        [self](roster_repair_reply& reply) {
          trace_reply_in(self->state.env, self->current_sender(), reply);
          if (!reply.events.empty())
            self->send(self->state.hub, committed_events{std::move(reply.events)});
        },
        [](caf::error&) {});
  return {
    [self](group_request& req) -> caf::typed_response_promise<ingest_reply> {
      auto promise = self->make_response_promise<ingest_reply>();
      auto community_id = req.community_id;
      auto ev = req.ev;
      // No timeout: the reply comes from the session after COMMIT (or a
      // definite failure); a timeout could not tell whether it committed.
      self->request(self->state.session, caf::infinite,
                    group_command_request{community_id, ev})
        .then(
          [self, promise, community_id, ev](group_command_reply& reply) mutable {
            trace_reply_in(self->state.env, self->current_sender(), reply);
            if (reply.result.outcome == db::write_outcome::stored)
              after_commit(self, community_id, ev, reply.change);
            else if (reply.result.outcome == db::write_outcome::duplicate
                     || reply.result.outcome == db::write_outcome::failed)
              after_uncertain(self, community_id, ev);
            promise.deliver(ingest_reply{reply.result.outcome, reply.result.reason});
          },
          [self, promise, community_id, ev](caf::error&) mutable {
            after_uncertain(self, community_id, ev);
            promise.deliver(ingest_reply{db::write_outcome::failed, "group session unavailable"});
          });
      return promise;
    },
    [self](fence_probe_request req) {
      return self->delegate(self->state.session, req);
    },
    [self](roster_repair_request& req) -> caf::typed_response_promise<roster_repair_reply> {
      auto promise = self->make_response_promise<roster_repair_reply>();
      self->request(self->state.session, caf::infinite, req)
        .then(
          [self, promise](roster_repair_reply& reply) mutable {
            trace_reply_in(self->state.env, self->current_sender(), reply);
            if (!reply.events.empty())
              self->send(self->state.hub, committed_events{reply.events});
            promise.deliver(std::move(reply));
          },
          [promise](caf::error& err) mutable {
            roster_repair_reply reply;
            reply.err = {ec::unavailable, "group session unavailable: " + caf::to_string(err)};
            promise.deliver(std::move(reply));
          });
      return promise;
    },
    [self](channels_archived& msg) {
      // From the TTL reaper's database session: an input of the node.
      trace_node_message(self->state.env, "input", msg);
      // 39000 carries the archived flag: republish.
      for (auto& c : msg.channels)
        self->send(roster_for(self, c.community_id, c.channel), roster_dirty{});
    },
  };
}

}  // namespace waggle
