#include "db/membership_store.hpp"
#include "db/read_budget.hpp"

#include <algorithm>
#include <map>
#include <set>

#include <pqxx/except>
#include <pqxx/nontransaction>
#include <pqxx/result>

#include "db/advisory_locks.hpp"
#include "db/event_store.hpp"
#include "db/sql_util.hpp"

namespace waggle::db {

using sql::array_literal;
using sql::is_hex64;

namespace {

// The NIP-43 kinds the relay signs (docs/communities.md).
constexpr int32_t kind_member_added = 8000;
constexpr int32_t kind_member_removed = 8001;
constexpr int32_t kind_membership_list = 13534;

template <class Fn>
auto in_transaction(pqxx::connection& conn, Fn&& fn) -> decltype(fn(std::declval<pqxx::work&>())) {
  try {
    pqxx::work tx(conn);
    auto out = fn(tx);
    // A refusal changes nothing: only a result is committed.
    if (out)
      tx.commit();
    return out;
  } catch (const pqxx::broken_connection&) {
    return make_status(ec::unavailable, "database unavailable");
  } catch (const pqxx::sql_error& e) {
    return make_status(ec::internal, std::string("membership change failed (SQLSTATE ")
                                       + e.sqlstate() + ")");
  }
}

std::optional<std::string> nullable(const std::string& hex) {
  if (hex.empty())
    return std::nullopt;
  return hex;
}

}  // namespace

std::string community_membership_lock_key(int64_t community_id) {
  return "waggle_community_membership:" + std::to_string(community_id);
}

std::string invites_lock_key(int64_t community_id) {
  return "waggle_invites:" + std::to_string(community_id);
}

community_access read_community_access(pqxx::connection& conn, int64_t community_id,
                                       const std::vector<std::string>& pubkeys,
                                       read_budget* budget) {
  array_literal pk;
  for (const auto& p : pubkeys)
    if (is_hex64(p))
      pk.bytea_hex(p);
  pqxx::nontransaction tx(conn);  // one statement: BEGIN/COMMIT would only add round trips
  before_statement(budget, tx);
  // One row for the community, then one per asked pubkey that is not banned
  // (member or guest). A plain read: a change that commits after it orders
  // after this read and reaches the reader's subscriptions as a revocation.
  // Prepared once per connection: every REQ that names a channel or a closed
  // community runs it twice, and parsing and planning it cost more than running it.
  conn.prepare("waggle_read_community_access",
    "SELECT co.policy, NULL::text, false FROM communities co WHERE co.id = $1 "
    "UNION ALL "
    "SELECT NULL, encode(k.pk, 'hex'), m.pubkey IS NOT NULL "
    "  FROM unnest($2::bytea[]) AS k(pk) "
    "  LEFT JOIN community_members m ON m.community_id = $1 AND m.pubkey = k.pk "
    "        AND m.removed_at IS NULL "
    " WHERE NOT EXISTS (SELECT 1 FROM community_banned_pubkeys b "
    "                    WHERE b.community_id = $1 AND b.pubkey = k.pk)");
  auto r = tx.exec_prepared("waggle_read_community_access",
    community_id, pk.str());
  tx.commit();
  community_access out;
  for (const auto& row : r) {
    if (!row[0].is_null()) {
      out.exists = true;
      out.policy = parse_community_policy(row[0].as<std::string>()).value_or(community_policy::closed);
    } else if (row[2].as<bool>()) {
      out.members.push_back(row[1].as<std::string>());
    } else {
      out.guests.push_back(row[1].as<std::string>());
    }
  }
  return out;
}

std::optional<member_role> role_of(pqxx::transaction_base& tx, int64_t community_id,
                                   const std::string& pubkey) {
  if (!is_hex64(pubkey))
    return std::nullopt;
  auto r = tx.exec_params(
    "SELECT role FROM community_members "
    " WHERE community_id = $1 AND pubkey = decode($2, 'hex') AND removed_at IS NULL",
    community_id, pubkey);
  if (r.empty())
    return std::nullopt;
  return parse_member_role(r[0][0].as<std::string>());
}

bool add_member(pqxx::transaction_base& tx, int64_t community_id, const std::string& pubkey,
                member_role role, const std::string& by) {
  auto r = tx.exec_params(
    "INSERT INTO community_members (community_id, pubkey, role, added_by) "
    "VALUES ($1, decode($2, 'hex'), $3, decode($4, 'hex')) "
    "ON CONFLICT (community_id, pubkey) DO UPDATE "
    "   SET role = EXCLUDED.role, added_by = EXCLUDED.added_by, "
    "       added_at = CASE WHEN community_members.removed_at IS NULL "
    "                       THEN community_members.added_at ELSE now() END, "
    "       removed_at = NULL, removed_by = NULL "
    " WHERE community_members.removed_at IS NOT NULL OR community_members.role <> EXCLUDED.role "
    "RETURNING 1",
    community_id, pubkey, std::string(name_of(role)), nullable(by));
  return !r.empty();
}

result<bool> add_member(pqxx::connection& conn, int64_t community_id, const std::string& pubkey,
                        member_role role, const std::string& by) {
  if (!is_hex64(pubkey))
    return make_status(ec::invalid, "a pubkey is 64 lowercase hex characters");
  return in_transaction(conn, [&](pqxx::work& tx) -> result<bool> {
    return add_member(tx, community_id, pubkey, role, by);
  });
}

result<bool> remove_member(pqxx::transaction_base& tx, int64_t community_id,
                           const std::string& pubkey, const std::string& by) {
  if (!is_hex64(pubkey))
    return make_status(ec::invalid, "a pubkey is 64 lowercase hex characters");
  // Taken first so the last-owner check cannot race another removal.
  lock_exclusive(tx, community_membership_lock_key(community_id));
  auto owners = tx.exec_params(
    "SELECT count(*) FILTER (WHERE role = 'owner'), "
    "       bool_or(pubkey = decode($2, 'hex') AND role = 'owner') "
    "  FROM community_members WHERE community_id = $1 AND removed_at IS NULL",
    community_id, pubkey);
  if (!owners[0][1].is_null() && owners[0][1].as<bool>() && owners[0][0].as<int64_t>() <= 1)
    return make_status(ec::restricted, "the last owner of a community cannot be removed");
  auto r = tx.exec_params(
    "UPDATE community_members SET removed_at = now(), removed_by = decode($3, 'hex') "
    " WHERE community_id = $1 AND pubkey = decode($2, 'hex') AND removed_at IS NULL RETURNING 1",
    community_id, pubkey, nullable(by));
  return !r.empty();
}

result<bool> remove_member(pqxx::connection& conn, int64_t community_id,
                           const std::string& pubkey, const std::string& by) {
  return in_transaction(conn, [&](pqxx::work& tx) -> result<bool> {
    return remove_member(tx, community_id, pubkey, by);
  });
}

std::vector<member_entry> list_members(pqxx::connection& conn, int64_t community_id) {
  pqxx::read_transaction tx(conn);
  auto r = tx.exec_params(
    "SELECT encode(pubkey, 'hex'), role, extract(epoch FROM added_at)::bigint "
    "  FROM community_members WHERE community_id = $1 AND removed_at IS NULL ORDER BY pubkey",
    community_id);
  std::vector<member_entry> out;
  for (const auto& row : r)
    out.push_back({row[0].as<std::string>(),
                   parse_member_role(row[1].as<std::string>()).value_or(member_role::member),
                   row[2].as<int64_t>()});
  return out;
}

bool set_policy(pqxx::transaction_base& tx, int64_t community_id, community_policy policy) {
  return !tx
            .exec_params(
              "UPDATE communities SET policy = $2 WHERE id = $1 AND policy <> $2 RETURNING 1",
              community_id, std::string(name_of(policy)))
            .empty();
}

result<bool> set_policy(pqxx::connection& conn, int64_t community_id, community_policy policy) {
  return in_transaction(conn,
                        [&](pqxx::work& tx) -> result<bool> { return set_policy(tx, community_id, policy); });
}

void audit(pqxx::transaction_base& tx, int64_t community_id, const std::string& caller,
           std::string_view via, std::string_view method, std::string_view params_json, bool ok,
           std::string_view detail) {
  tx.exec_params(
    "INSERT INTO community_audit (community_id, caller, via, method, params, ok, detail) "
    "VALUES ($1, decode($2, 'hex'), $3, $4, $5, $6, $7)",
    community_id, nullable(is_hex64(caller) ? caller : std::string{}), std::string(via),
    std::string(method), std::string(params_json), ok, std::string(detail));
}

status create_invite(pqxx::connection& conn, int64_t community_id, const std::string& creator,
                     const std::string& code, int64_t now, int64_t expires_at,
                     const invite_limits& limits) {
  auto r = in_transaction(conn, [&](pqxx::work& tx) -> result<bool> {
    auto policy = tx.exec_params("SELECT policy FROM communities WHERE id = $1", community_id);
    if (policy.empty() || policy[0][0].as<std::string>() != "invite")
      return make_status(ec::restricted, "this community does not hand out invite codes");
    auto role = role_of(tx, community_id, creator);
    if (!role || *role == member_role::member)
      return make_status(ec::restricted, "only the community's owners and admins may invite");
    lock_exclusive(tx, invites_lock_key(community_id));
    tx.exec_params("DELETE FROM community_invites WHERE community_id = $1 AND claimed_by IS NULL "
                   "AND expires_at <= to_timestamp($2)",
                   community_id, now);
    auto open = tx.exec_params(
      "SELECT count(*), count(*) FILTER (WHERE created_by = decode($2, 'hex')) "
      "FROM community_invites WHERE community_id = $1 AND claimed_by IS NULL",
      community_id, creator);
    auto in_community = open[0][0].as<int64_t>();
    auto by_minter = open[0][1].as<int64_t>();
    if (limits.open_per_minter > 0 && by_minter >= limits.open_per_minter)
      return make_status(ec::rate_limited,
                         "you hold " + std::to_string(by_minter) +
                           " open invite codes, the most one admin may; wait for some to be "
                           "claimed or to expire");
    if (limits.open_per_community > 0 && in_community >= limits.open_per_community)
      return make_status(ec::rate_limited,
                         "this community holds " + std::to_string(in_community) +
                           " open invite codes, the most it may; wait for some to be claimed or "
                           "to expire");
    tx.exec_params(
      "INSERT INTO community_invites (community_id, code_hash, created_by, created_at, expires_at) "
      "VALUES ($1, sha256(convert_to($2, 'UTF8')), decode($3, 'hex'), to_timestamp($4), "
      "        to_timestamp($5))",
      community_id, code, creator, now, expires_at);
    audit(tx, community_id, creator, "nip43", "invite", "[]", true, "");
    return true;
  });
  return r ? status{} : r.error();
}

claim_result claim_invite(pqxx::connection& conn, int64_t community_id, const std::string& pubkey,
                          const std::string& code, int64_t now) {
  claim_result out;
  auto r = in_transaction(conn, [&](pqxx::work& tx) -> result<bool> {
    // EXCLUSIVE first: the ban and membership checks below cannot be
    // overtaken by a ban that commits before the membership does.
    lock_exclusive(tx, community_membership_lock_key(community_id));
    auto policy = tx.exec_params("SELECT policy FROM communities WHERE id = $1", community_id);
    if (policy.empty() || policy[0][0].as<std::string>() != "invite") {
      out = {claim_outcome::not_taking, policy.empty() || policy[0][0].as<std::string>() == "open"
                                          ? "this community is open to every authenticated key"
                                          : "this community takes no join requests"};
      return false;
    }
    if (!tx.exec_params("SELECT 1 FROM community_banned_pubkeys "
                        " WHERE community_id = $1 AND pubkey = decode($2, 'hex')",
                        community_id, pubkey)
           .empty()) {
      out = {claim_outcome::banned, "this key is banned from this community"};
      return false;
    }
    if (role_of(tx, community_id, pubkey)) {
      out = {claim_outcome::already_member, "already a member of this community"};
      return false;
    }
    // Single use: the UPDATE's row lock makes two claims of one code
    // serialise, and the second finds it claimed.
    auto claimed = tx.exec_params(
      "UPDATE community_invites SET claimed_by = decode($3, 'hex'), claimed_at = to_timestamp($4) "
      " WHERE community_id = $1 AND code_hash = sha256(convert_to($2, 'UTF8')) "
      "   AND claimed_at IS NULL AND expires_at > to_timestamp($4) "
      // A code is good only while whoever minted it may still invite: an
      // admin removed, demoted or banned takes its codes with it.
      "   AND EXISTS (SELECT 1 FROM community_members m "
      "                WHERE m.community_id = $1 AND m.pubkey = community_invites.created_by "
      "                  AND m.removed_at IS NULL AND m.role IN ('owner', 'admin')) "
      "   AND NOT EXISTS (SELECT 1 FROM community_banned_pubkeys b "
      "                    WHERE b.community_id = $1 AND b.pubkey = community_invites.created_by) "
      "RETURNING encode(created_by, 'hex')",
      community_id, code, pubkey, now);
    if (claimed.empty()) {
      out = {claim_outcome::bad_code, "unknown, used or expired invite code"};
      audit(tx, community_id, pubkey, "nip43", "join", "[]", false, out.detail);
      return true;  // commit the audit row
    }
    add_member(tx, community_id, pubkey, member_role::member, claimed[0][0].as<std::string>());
    audit(tx, community_id, pubkey, "nip43", "join", "[]", true, "");
    out = {claim_outcome::accepted, "welcome"};
    return true;
  });
  if (!r)
    return {claim_outcome::failed, r.error().reason};
  return out;
}

std::vector<int64_t> communities_with_pending_changes(pqxx::connection& conn) {
  pqxx::read_transaction tx(conn);
  std::vector<int64_t> out;
  for (const auto& row :
       tx.exec("SELECT DISTINCT community_id FROM community_changes WHERE NOT published"))
    out.push_back(row[0].as<int64_t>());
  return out;
}

access_publication publish_access_changes(
  pqxx::connection& conn, int64_t community_id, const relay_signer& signer, int64_t now,
  const std::function<void(const std::vector<std::string>&)>& after_capture) {
  access_publication out;
  pqxx::work tx(conn);
  // Lock order (docs/lock-protocol.md): replacement (the 13534 coordinate:
  // two publishers of one community, on any node, serialise here) ->
  // community_membership SHARED, held to COMMIT.
  lock_exclusive(tx, replacement_lock_key(community_id, kind_membership_list, signer.pubkey, ""));
  lock_shared(tx, community_membership_lock_key(community_id));

  // Every change of this community is committed by now (each held the key
  // EXCLUSIVE until its COMMIT), so this read misses none.
  auto changes = tx.exec_params(
    "SELECT seq, encode(pubkey, 'hex'), change FROM community_changes "
    " WHERE community_id = $1 AND NOT published ORDER BY seq",
    community_id);
  if (changes.empty()) {
    tx.abort();
    return out;
  }
  for (const auto& row : tx.exec_params(
         "SELECT encode(m.pubkey, 'hex') FROM community_members m "
         " WHERE m.community_id = $1 AND m.removed_at IS NULL "
         "   AND NOT EXISTS (SELECT 1 FROM community_banned_pubkeys b "
         "                    WHERE b.community_id = m.community_id AND b.pubkey = m.pubkey) "
         " ORDER BY m.pubkey",
         community_id))
    out.members.push_back(row[0].as<std::string>());
  if (after_capture)
    after_capture(out.members);

  std::vector<ingest_item> items;
  auto make = [&](int32_t kind, int64_t created_at, std::vector<proto::tag> tags) {
    proto::event ev;
    ev.kind = kind;
    ev.created_at = created_at;
    ev.tags = std::move(tags);
    proto::sign(ev, signer.secret);
    items.push_back({community_id, std::make_shared<const proto::event>(std::move(ev))});
  };
  array_literal seqs;
  bool membership_changed = false;
  std::set<std::string> revoked;
  for (const auto& row : changes) {
    seqs.integer(row[0].as<int64_t>());
    auto change = row[2].as<std::string>();
    std::string pk = row[1].is_null() ? "" : row[1].as<std::string>();
    if (change == "added") {
      membership_changed = true;
      make(kind_member_added, now, {{"-"}, {"p", pk}});
    } else if (change == "removed") {
      membership_changed = true;
      revoked.insert(pk);
      make(kind_member_removed, now, {{"-"}, {"p", pk}});
    } else if (change == "banned") {
      // A banned member leaves the published list (no 8001: it was not removed).
      membership_changed = true;
      revoked.insert(pk);
    } else if (change == "policy") {
      out.policy_changed = true;
    }
  }
  if (out.policy_changed) {
    auto p = tx.exec_params("SELECT policy FROM communities WHERE id = $1", community_id);
    out.closed = !p.empty() && p[0][0].as<std::string>() != "open";
  }
  if (membership_changed) {
    // A newer created_at than any stored list, so the replacement always wins.
    auto newest = tx.exec_params(
      "SELECT max(created_at) FROM events WHERE community_id = $1 AND kind = $2 "
      "   AND pubkey = decode($3, 'hex')",
      community_id, kind_membership_list, signer.pubkey);
    int64_t created = now;
    if (!newest[0][0].is_null())
      created = std::max(now, newest[0][0].as<int64_t>() + 1);
    std::vector<proto::tag> tags{{"-"}};
    for (const auto& m : out.members)
      tags.push_back({"member", m});
    make(kind_membership_list, created, std::move(tags));
  }
  write_options opts;
  opts.relay_pubkey = signer.pubkey;
  auto results = write_events(tx, items, opts);
  for (size_t i = 0; i < items.size(); ++i)
    if (results[i].outcome == write_outcome::stored)
      out.events.push_back(items[i].ev);
  tx.exec_params(
    "UPDATE community_changes SET published = true "
    " WHERE community_id = $1 AND seq = ANY($2::bigint[])",
    community_id, seqs.str());
  tx.commit();
  out.revoked.assign(revoked.begin(), revoked.end());
  return out;
}

}  // namespace waggle::db
