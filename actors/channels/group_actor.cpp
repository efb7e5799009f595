#include "actors/channels/group_actor.hpp"

#include "actors/support/log.hpp"
#include "actors/trace/trace_recorder.hpp"
#include "actors/channels/roster_actor.hpp"
#include "actors/channels/ttl_reaper.hpp"
#include "messages/proto/nip29.hpp"

namespace waggle {

void group_state::init(group_ptr self_ptr, group_session_actor group_session, hub_actor fanout,
                       node_env e, std::string database_url, caf::timespan reap_interval,
                       bool repair_on_start) {
  self = self_ptr;
  session = std::move(group_session);
  hub = std::move(fanout);
  env = std::move(e);
  self->link_to(session);
  if (!database_url.empty())
    reaper = self->spawn<caf::detached + caf::linked>(
      ttl_reaper_impl, std::move(database_url), caf::actor_cast<group_actor>(self), reap_interval);
  if (repair_on_start)
    // A restart lost the roster actors' pending publications (and maybe a
    // command's effects between its COMMIT and our reply): republish every
    // roster that differs from the membership.
    self->request(session, caf::infinite, roster_repair_request{env.unix_now()})
      .then(traced_reply<roster_repair_reply>(self, env, [this](roster_repair_reply& reply) {
              if (!reply.events.empty())
                self->send(hub, committed_events{std::move(reply.events)});
            }),
            [](caf::error&) {});
}

caf::typed_response_promise<ingest_reply> group_state::on_command(const group_request& req) {
  auto promise = self->make_response_promise<ingest_reply>();
  auto community_id = req.community_id;
  auto ev = req.ev;
  // No timeout: the reply comes from the session after COMMIT (or a
  // definite failure); a timeout could not tell whether it committed.
  self->request(session, caf::infinite, group_command_request{community_id, ev})
    .then(traced_reply<group_command_reply>(
            self, env,
            [this, promise, community_id, ev](group_command_reply& reply) mutable {
              promise.deliver(on_command_reply(community_id, ev, reply));
            }),
          [this, promise, community_id, ev](caf::error&) mutable {
            after_uncertain(community_id, ev);
            promise.deliver(ingest_reply{write_outcome::failed, "group session unavailable"});
          });
  return promise;
}

ingest_reply group_state::on_command_reply(int64_t community_id, const event_ptr& ev,
                                           const group_command_reply& reply) {
  if (reply.result.outcome == write_outcome::stored)
    after_commit(community_id, ev, reply.change);
  else if (reply.result.outcome == write_outcome::duplicate
           || reply.result.outcome == write_outcome::failed)
    after_uncertain(community_id, ev);
  return ingest_reply{reply.result.outcome, reply.result.reason};
}

caf::typed_response_promise<roster_repair_reply>
group_state::on_repair(const roster_repair_request& req) {
  auto promise = self->make_response_promise<roster_repair_reply>();
  self->request(session, caf::infinite, req)
    .then(traced_reply<roster_repair_reply>(
            self, env,
            [this, promise](roster_repair_reply& reply) mutable {
              if (!reply.events.empty())
                self->send(hub, committed_events{reply.events});
              promise.deliver(std::move(reply));
            }),
          [promise](caf::error& err) mutable {
            roster_repair_reply reply;
            reply.err = {ec::unavailable, "group session unavailable: " + caf::to_string(err)};
            promise.deliver(std::move(reply));
          });
  return promise;
}

void group_state::on_archived(const channels_archived& msg) {
  // 39000 carries the archived flag: republish.
  for (auto& c : msg.channels)
    self->send(roster_for(c.community_id, c.channel), roster_dirty{});
}

void group_state::after_commit(int64_t community_id, const event_ptr& ev,
                               const group_change& change) {
  self->send(hub, committed_events{{ingest_item{community_id, ev}}});
  for (const auto& pk : change.removed)
    self->send(hub, channel_revoked{community_id, change.channel, pk, false});
  if (change.deleted)
    self->send(hub, channel_revoked{community_id, change.channel, "", true});
  else if (change.became_private)
    self->send(hub, channel_revoked{community_id, change.channel, "", false});
  if (change.any())
    self->send(roster_for(community_id, change.channel), roster_dirty{});
}

// A command whose outcome we cannot trust to describe what committed: a
// duplicate (its first copy committed, but whoever sent that may never have
// heard, e.g. after an in-doubt COMMIT or a restart of this actor) or a
// failure (it may have committed). Fail closed: revoke whatever access the
// command could have ended, and republish the channel's state from the
// database. A revocation that turns out unnecessary only makes a client
// send its REQ again.
void group_state::after_uncertain(int64_t community_id, const event_ptr& ev) {
  namespace nip29 = proto::nip29;
  auto cmd = nip29::parse_group_command(*ev);
  if (!cmd)
    return;
  switch (cmd->kind) {
    case nip29::kind_remove_user:
      for (const auto& u : cmd->users)
        self->send(hub, channel_revoked{community_id, cmd->group, u.pubkey, false});
      break;
    case nip29::kind_leave_request:
      self->send(hub, channel_revoked{community_id, cmd->group, ev->pubkey, false});
      break;
    case nip29::kind_delete_group:
      self->send(hub, channel_revoked{community_id, cmd->group, "", true});
      break;
    case nip29::kind_edit_metadata:
      if (cmd->is_private.value_or(false))
        self->send(hub, channel_revoked{community_id, cmd->group, "", false});
      break;
    default:
      break;
  }
  self->send(roster_for(community_id, cmd->group), roster_dirty{});
}

roster_actor& group_state::roster_for(int64_t community_id, const std::string& channel) {
  auto key = std::make_pair(community_id, channel);
  auto i = rosters.find(key);
  if (i == rosters.end()) {
    auto roster_name = "roster:" + std::to_string(community_id) + ":" + channel;
    auto roster = self->spawn<caf::linked>(roster_actor_impl, community_id, channel, session, hub,
                                           env.for_actor(roster_name));
    if (env.trace)
      env.trace->spawned(roster_name, caf::actor_cast<caf::actor>(roster));
    i = rosters.emplace(key, std::move(roster)).first;
  }
  return i->second;
}

group_actor::behavior_type group_actor_impl(group_ptr self, group_session_actor session,
                                            hub_actor hub, node_env env, std::string database_url,
                                            caf::timespan reap_interval, bool repair_on_start) {
  self->state.init(self, std::move(session), std::move(hub), std::move(env),
                   std::move(database_url), reap_interval, repair_on_start);
  return {
    // -- commands ---------------------------------------------------------------
    [self](group_request& req) { return self->state.on_command(req); },
    // -- fence probe and roster repair ------------------------------------------
    [self](fence_probe_request req) { return self->delegate(self->state.session, req); },
    [self](roster_repair_request& req) { return self->state.on_repair(req); },
    // -- reaper -----------------------------------------------------------------
    [self](channels_archived& msg) {
      // From the TTL reaper's database session: an input of the node.
      trace_node_message(self->state.env, "input", msg);
      self->state.on_archived(msg);
    },
  };
}

}  // namespace waggle
