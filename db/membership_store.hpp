#pragma once

// Who may use a community (docs/communities.md): its policy, its members,
// NIP-43 invite codes, and the publication of NIP-43 state (13534, 8000,
// 8001). Each function that changes something is one transaction; the
// triggers of migrations/0004 take `waggle_community_membership:<community>`
// EXCLUSIVE and write the change to the community_changes outbox, so every
// change, from any path or from psql, reaches the publisher.

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <pqxx/connection>
#include <pqxx/transaction>

#include "db/group_store.hpp"
#include "messages/proto/status.hpp"
#include "messages/values.hpp"

namespace waggle::db {

class read_budget;  // db/read_budget.hpp: the time a read may spend, all statements together

std::string community_membership_lock_key(int64_t community_id);
// Held by an invite's mint while it counts the open codes (docs/lock-protocol.md).
std::string invites_lock_key(int64_t community_id);

// Read access of `pubkeys` (hex) to a community: the facts a grant is made of.
struct community_access {
  bool exists = false;
  community_policy policy = community_policy::closed;
  std::vector<std::string> members;  // active members among `pubkeys`, not banned
  std::vector<std::string> guests;   // the others among `pubkeys`, not banned
};
community_access read_community_access(pqxx::connection& conn, int64_t community_id,
                                       const std::vector<std::string>& pubkeys,
                                       read_budget* budget = nullptr);

struct member_entry {
  std::string pubkey;  // hex
  member_role role = member_role::member;
  int64_t added_at = 0;  // unix seconds
};

// The active role of `pubkey`, if it is a member (inside a caller's transaction).
std::optional<member_role> role_of(pqxx::transaction_base& tx, int64_t community_id,
                                   const std::string& pubkey);

// Adds (or re-adds, or changes the role of) a member. `by` is the pubkey that
// asked (empty: the operator). Returns true if anything changed.
// (inside a caller's transaction; the _tx form lets NIP-86 audit in the same one)
bool add_member(pqxx::transaction_base& tx, int64_t community_id, const std::string& pubkey,
                member_role role, const std::string& by);
result<bool> add_member(pqxx::connection& conn, int64_t community_id, const std::string& pubkey,
                        member_role role, const std::string& by);

// Soft-removes a member. Refused (ec::restricted) if it would remove the last
// owner. Returns true if the key was an active member.
result<bool> remove_member(pqxx::transaction_base& tx, int64_t community_id,
                           const std::string& pubkey, const std::string& by);
result<bool> remove_member(pqxx::connection& conn, int64_t community_id,
                           const std::string& pubkey, const std::string& by);

std::vector<member_entry> list_members(pqxx::connection& conn, int64_t community_id);

// True when the policy changed (the trigger then records and announces it).
bool set_policy(pqxx::transaction_base& tx, int64_t community_id, community_policy policy);
result<bool> set_policy(pqxx::connection& conn, int64_t community_id, community_policy policy);

// Writes one row of the audit table in the caller's transaction. `caller`
// empty: the operator. `via`: "nip86", "cli" or "nip43".
void audit(pqxx::transaction_base& tx, int64_t community_id, const std::string& caller,
           std::string_view via, std::string_view method, std::string_view params_json, bool ok,
           std::string_view detail);

// -- NIP-43 -------------------------------------------------------------------

// How many codes may be open (unclaimed, unexpired) at once. A code is a row
// and a key into the community: without a bound one admin's client (or a
// stolen admin key) fills the table and hands out an unbounded number of
// ways in. 0 = no bound.
struct invite_limits {
  int64_t open_per_minter = 100;
  int64_t open_per_community = 1000;
};

// Stores a fresh invite code (only its hash), valid until `expires_at`.
// Refused unless the community takes invites and `creator` is an owner or admin;
// rate_limited when `creator` or the community holds `limits` open codes.
// Counted under the community's invites lock (docs/lock-protocol.md), so two
// nodes minting at once cannot both take the last place. Expired codes nobody
// claimed are deleted on the way: they open nothing and only fill the table.
status create_invite(pqxx::connection& conn, int64_t community_id, const std::string& creator,
                     const std::string& code, int64_t now, int64_t expires_at,
                     const invite_limits& limits = {});

enum class claim_outcome : uint8_t {
  accepted,        // the code was good: the key is a member now
  already_member,  // nothing to do (the code is left unused)
  not_taking,      // the community takes no join requests (open, or closed)
  bad_code,        // unknown, used, or expired
  banned,
  failed,          // the database refused the transaction: nothing changed, try again
};
struct claim_result {
  claim_outcome outcome = claim_outcome::bad_code;
  std::string detail;
};
// A join request (kind 28934): claims `code` for `pubkey` in one transaction.
claim_result claim_invite(pqxx::connection& conn, int64_t community_id, const std::string& pubkey,
                          const std::string& code, int64_t now);

// -- publication --------------------------------------------------------------

// Communities with access changes not yet published.
std::vector<int64_t> communities_with_pending_changes(pqxx::connection& conn);

// What one publication did, for the hub after COMMIT.
struct access_publication {
  std::vector<event_ptr> events;      // 8000 / 8001 / 13534 stored by it
  std::vector<std::string> revoked;   // pubkeys removed or banned since the last one
  bool closed = false;                // the policy changed to closed or invite
  bool policy_changed = false;
  std::vector<std::string> members;   // the captured list (tests)
};
// Publishes a community's pending changes in ONE transaction, under the lock
// protocol (docs/lock-protocol.md): the replacement key of its 13534 EXCLUSIVE,
// then `waggle_community_membership:<community>` SHARED held to COMMIT, so no
// membership change can commit between the capture and the publication. One
// 8000/8001 per added/removed change, then the full 13534, signed by the relay.
// `after_capture` runs with the locks held (tests).
access_publication publish_access_changes(
  pqxx::connection& conn, int64_t community_id, const relay_signer& signer, int64_t now,
  const std::function<void(const std::vector<std::string>&)>& after_capture = {});

}  // namespace waggle::db
