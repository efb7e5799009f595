#include "actors/connection/connection_actor.hpp"

// The connection's side of access (docs/communities.md, docs/channels.md):
// the grants a subscription was registered with and how revocations narrow
// them, the access check of an ephemeral event, and the NIP-43 requests it
// forwards to the membership actor.

#include <algorithm>
#include <set>

#include "actors/trace/trace_recorder.hpp"
#include "messages/proto/client_message.hpp"

namespace waggle {

void connection_state::submit_membership(event_ptr ptr) {
  if (!peers.membership)
    return reject(ptr->id, {ec::unavailable, "membership requests are not served here"});
  ++events_in_flight;
  auto id = ptr->id;
  self->request(peers.membership, settings.ingest_timeout,
                membership_request{settings.community_id, std::move(ptr)})
    .then(
      traced_reply<membership_reply>(self, env, [this, id](membership_reply& reply) {
        --events_in_flight;
        if (env.stats)
          env.stats->count(answer{reply.accepted, reply.message,
                                  reply.accepted ? std::string_view{"accepted"}
                                                 : std::string_view{"restricted"}});
        send_ok(id, reply.accepted, reply.message);
        finish_drain_if_idle();
      }),
      [this, id](caf::error&) {
        --events_in_flight;
        reject(id, {ec::unavailable, "membership actor unavailable"});
        finish_drain_if_idle();
      });
}

void connection_state::submit_ephemeral(event_ptr ptr, std::optional<std::string> channel) {
  // Ephemeral events are verified and fanned out, never stored, and only
  // for those who may use the community (and, in a channel such as typing
  // or presence, its members): the same access check a REQ gets.
  if (!channel && open_now())
    return hand_to_hub(std::move(ptr));
  // The check is a read at the pool, admitted like a COUNT (one of the
  // connection's in-flight read slots, one token) and withdrawn when nobody
  // waits for it: bounded by events in flight alone, one connection queued
  // 512 of them. No grant is cached: a connection without a subscription
  // hears no revocation, so a cached grant could outlive a removal.
  auto ticket = subs.next_generation();
  auto now = env.sources.steady_now ? env.sources.steady_now() : bucket_clock::now();
  auto refused = reads.admit(ticket, {}, true, {}, authed, settings.remote_ip, now);
  if (!refused.st.ok()) {
    if (env.stats)
      env.stats->count_refused(refused.label);
    return reject(ptr->id, refused.st);
  }
  ++events_in_flight;
  read_access access{{}, {ptr->pubkey}};
  if (channel)
    access.channels.push_back(*channel);
  auto asked =
    self->request(peers.reader, settings.read_timeout, access_request{settings.community_id, access});
  const auto request_id = asked.id().request_id().integer_value();
  reads.at_pool(ticket, request_id);
  std::move(asked).then(
    traced_reply<access_reply>(self, env, [this, ptr, ticket, in_channel = channel.has_value()](
                                            access_reply& reply) {
      reads.done(ticket);
      --events_in_flight;
      if (!reply.err.ok())
        reject(ptr->id, reply.err);
      else if (in_channel && (reply.grants.size() != 1 || reply.grants[0].members.empty()))
        reject(ptr->id, {ec::restricted, "not a member of this channel"});
      else
        hand_to_hub(ptr);
      finish_drain_if_idle();
    }),
    [this, ptr, ticket, request_id](caf::error&) {
      reads.done(ticket);
      --events_in_flight;
      // Timed out while queued: it must not run for nobody.
      self->send(peers.reader, read_withdraw{{request_id}, false});
      reject(ptr->id, {ec::unavailable, "access check failed"});
      finish_drain_if_idle();
    });
}

void connection_state::request_invite(const std::string& sub_id, uint64_t generation,
                                      bool only_invites) {
  if (!peers.membership || invite_in_flight)
    return;
  invite_in_flight = true;
  self
    ->request(peers.membership, settings.read_timeout,
              invite_request{settings.community_id, {authed.begin(), authed.end()}})
    .then(traced_reply<invite_reply>(self, env,
                                     [this, sub_id, generation, only_invites](invite_reply& reply) {
                                       invite_in_flight = false;
                                       if (!subs.is_current(sub_id, generation))
                                         return;
                                       if (reply.invite)
                                         send(proto::render_event(sub_id, reply.invite->raw));
                                       else if (only_invites)
                                         end_subscription(sub_id, reply.err.message());
                                     }),
          [this](caf::error&) { invite_in_flight = false; });
}

read_access connection_state::access_for(const std::vector<proto::filter>& filters) const {
  std::set<std::string> channels;
  for (const auto& f : filters)
    if (auto h = f.tags.find('h'); h != f.tags.end())
      channels.insert(h->second.begin(), h->second.end());
  return {{channels.begin(), channels.end()}, {authed.begin(), authed.end()}};
}

void connection_state::on_revoked(const channel_revoked& msg) {
  if (msg.community_id != settings.community_id)
    return;
  auto ended = subs.revoke_channel(msg);
  for (auto& sub_id : ended)
    revoke_subscription(sub_id, status{ec::restricted, msg.deleted
                                                      ? "channel " + msg.channel + " was deleted"
                                                      : "no longer a member of private channel " +
                                                          msg.channel}
                               .message());
}

bool connection_state::open_now() const {
  return settings.community_open && (!settings.still_open || settings.still_open());
}

void connection_state::on_revoked(const access_revoked& msg) {
  if (msg.community_id != settings.community_id)
    return;
  if (msg.pubkey.empty())
    settings.community_open = false;
  else {
    // The key lost its access: its next frame is refused here, and it must
    // authenticate again once it is let back in (with a verify: its old
    // AUTH is no longer answered from memory).
    authed.erase(msg.pubkey);
    auth_ids.erase(msg.pubkey);
  }
  auto ended = subs.revoke_access(msg.pubkey);
  for (auto& sub_id : ended)
    revoke_subscription(sub_id, status{ec::restricted, "not a member of this community"}.message());
}

void connection_state::on_blocked(const address_blocked& msg) {
  if (closed || msg.community_id != settings.community_id || settings.remote_ip.empty()
      || unmapped_ip(msg.ip) != unmapped_ip(settings.remote_ip))
    return;
  // Unlike a drain, nothing in flight is waited for: the address is refused
  // from now on, and its events' answers would go to a blocked client.
  send(proto::render_notice("blocked: this address is blocked in this community"));
  sink->close(1008, "address blocked");
  closed = true;
  withdraw_all_reads();
  self->quit();
}

}  // namespace waggle
