#include "actors/communities/membership_actor.hpp"

#include <pqxx/except>

#include "actors/support/log.hpp"
#include "db/membership_store.hpp"
#include "messages/proto/nip43.hpp"

namespace waggle {

namespace nip43 = proto::nip43;

namespace {

membership_reply refused(ec code, std::string reason) {
  return {false, status{code, std::move(reason)}.message()};
}

}  // namespace

void membership_state::init(membership_ptr self_ptr, std::string database_url, db::relay_signer s,
                            community_watcher_actor w, hub_actor h, node_env e,
                            membership_settings cfg) {
  self = self_ptr;
  env = e.for_actor("membership");
  session = std::make_unique<db::session>(std::move(database_url), "membership",
                                          std::vector<std::string>{}, log::session_report);
  signer = std::move(s);
  watcher = std::move(w);
  hub = std::move(h);
  settings = cfg;
}

membership_reply membership_state::on_request(const membership_request& req) {
  if (!req.ev)
    return refused(ec::invalid, "no event");
  try {
    auto reply = req.ev->kind == nip43::kind_join_request ? join(req.community_id, *req.ev)
                                                          : leave(req.community_id, *req.ev);
    if (watcher)
      self->send(watcher, access_poke{});
    return reply;
  } catch (const pqxx::broken_connection&) {
    session->reset();
  } catch (const std::exception& e) {
    log::error("membership", "request failed", {{"error", e.what()}});
  }
  return refused(ec::unavailable, "database unavailable");
}

membership_reply membership_state::join(int64_t community_id, const proto::event& ev) {
  auto code = nip43::claim_of(ev);
  if (!code || code->empty() || code->size() > 256)
    return refused(ec::invalid, "a join request carries one claim tag with an invite code");
  auto* conn = session->get();
  if (!conn)
    return refused(ec::unavailable, "database unavailable");
  auto claim = db::claim_invite(*conn, community_id, ev.pubkey, *code, env.unix_now());
  switch (claim.outcome) {
    case db::claim_outcome::accepted:
      return {true, "claim-accepted: you are now a member of this community"};
    case db::claim_outcome::already_member:
      return {true, "claim-ignored: " + claim.detail};
    case db::claim_outcome::not_taking:
      return refused(ec::restricted, claim.detail);
    case db::claim_outcome::banned:
      return refused(ec::blocked, claim.detail);
    case db::claim_outcome::failed:
      return refused(ec::unavailable, claim.detail);
    case db::claim_outcome::bad_code:
      break;
  }
  return refused(ec::restricted, claim.detail);
}

membership_reply membership_state::leave(int64_t community_id, const proto::event& ev) {
  auto* conn = session->get();
  if (!conn)
    return refused(ec::unavailable, "database unavailable");
  auto left = db::remove_member(*conn, community_id, ev.pubkey, ev.pubkey);
  if (!left)
    return {false, left.error().message()};
  if (!*left)
    return {true, "duplicate: not a member of this community"};
  // Committed: the key's subscriptions end now, before its OK and before
  // any later event reaches the hub from this node (the watcher sends the
  // same revocation again after publishing; a repeat changes nothing).
  if (hub)
    self->send(hub, access_revoked{community_id, ev.pubkey});
  return {true, ""};
}

invite_reply membership_state::on_invite(const invite_request& req) {
  invite_reply reply;
  auto* conn = session->get();
  if (!conn) {
    reply.err = {ec::unavailable, "database unavailable"};
    return reply;
  }
  try {
    auto now = env.unix_now();
    // 128 bits from the node's randomness (a NIP-42 challenge is 32 random
    // bytes in hex): enough that codes cannot be guessed.
    auto code = env.random_challenge().substr(0, 32);
    reply.err = {ec::restricted, "only the community's owners and admins may invite"};
    for (const auto& pk : req.pubkeys) {
      auto st = db::create_invite(*conn, req.community_id, pk, code, now,
                                  now + settings.invite_ttl_seconds, settings.invites);
      if (st.ok()) {
        reply.err = {};
        reply.invite = std::make_shared<const proto::event>(
          nip43::make_invite(code, now, signer.secret));
        return reply;
      }
      reply.err = st;
      if (st.code != ec::restricted)
        break;
    }
  } catch (const pqxx::broken_connection&) {
    session->reset();
    reply.err = {ec::unavailable, "database unavailable"};
  } catch (const std::exception& e) {
    log::error("membership", "invite failed", {{"error", e.what()}});
    reply.err = {ec::internal, "invite failed"};
  }
  return reply;
}

membership_actor::behavior_type membership_actor_impl(membership_ptr self, std::string database_url,
                                                      db::relay_signer signer,
                                                      community_watcher_actor watcher,
                                                      hub_actor hub, node_env env,
                                                      membership_settings settings) {
  self->state.init(self, std::move(database_url), std::move(signer), std::move(watcher),
                   std::move(hub), std::move(env), settings);
  return {
    [self](const membership_request& req) { return self->state.on_request(req); },
    [self](const invite_request& req) { return self->state.on_invite(req); },
  };
}

}  // namespace waggle
