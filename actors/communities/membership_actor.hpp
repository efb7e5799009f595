#pragma once

// The membership actor: NIP-43 requests of one node (docs/communities.md).
// Join requests (28934) claim an invite code, leave requests (28936) end a
// membership, and a REQ for kind 28935 gets a fresh single-use code from an
// owner's or admin's connection. Every answer is sent after its transaction
// committed; the change itself reaches the NIP-43 publication and the
// revocations through the community watcher (poked at once). Detached, with
// its own connection.

#include <memory>
#include <string>

#include "actors/support/env.hpp"
#include "db/group_store.hpp"
#include "db/membership_store.hpp"
#include "db/session.hpp"
#include "messages/interfaces.hpp"

namespace waggle {

struct membership_settings {
  int64_t invite_ttl_seconds = 24 * 3600;
  db::invite_limits invites;  // open codes per minter and per community
};

struct membership_state;
using membership_ptr = membership_actor::stateful_pointer<membership_state>;

struct membership_state {
  static inline const char* name = "membership";

  membership_ptr self = nullptr;
  std::unique_ptr<db::session> session;
  db::relay_signer signer;
  community_watcher_actor watcher;
  hub_actor hub;  // a leave is revoked here before its OK, like a NIP-29 removal
  node_env env;
  membership_settings settings;

  void init(membership_ptr self_ptr, std::string database_url, db::relay_signer s,
            community_watcher_actor w, hub_actor h, node_env e, membership_settings cfg);
  membership_reply on_request(const membership_request& req);
  invite_reply on_invite(const invite_request& req);

 private:
  membership_reply join(int64_t community_id, const proto::event& ev);
  membership_reply leave(int64_t community_id, const proto::event& ev);
};

membership_actor::behavior_type membership_actor_impl(membership_ptr self, std::string database_url,
                                                      db::relay_signer signer,
                                                      community_watcher_actor watcher,
                                                      hub_actor hub, node_env env,
                                                      membership_settings settings);

}  // namespace waggle
