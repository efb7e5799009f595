#include "db/group_store.hpp"
#include "db/read_budget.hpp"

#include "db/advisory_locks.hpp"
#include "db/sql_util.hpp"

#include <algorithm>
#include <map>

#include <pqxx/nontransaction>
#include <pqxx/result>
#include <pqxx/transaction>

namespace waggle::db {

namespace nip29 = proto::nip29;
using namespace sql;

namespace {

struct channel_row {
  nip29::channel_view view;
  std::optional<int32_t> ttl_seconds;
};

channel_row read_channel(pqxx::transaction_base& tx, int64_t community_id,
                         const std::string& channel) {
  // A plain read: the caller holds the membership lock that orders it
  // against every change of the facts the decision depends on.
  auto r = tx.exec_params(
    "SELECT visibility, deleted_at IS NOT NULL, archived_at IS NOT NULL, ttl_seconds "
    "FROM channels WHERE community_id = $1 AND id = $2",
    community_id, channel);
  channel_row row;
  if (r.empty())
    return row;
  row.view.exists = true;
  row.view.open = r[0][0].as<std::string>() == "open";
  row.view.deleted = r[0][1].as<bool>();
  row.view.archived = r[0][2].as<bool>();
  if (!r[0][3].is_null())
    row.ttl_seconds = r[0][3].as<int32_t>();
  return row;
}

nip29::roster read_roster(pqxx::transaction_base& tx, int64_t community_id,
                          const std::string& channel) {
  auto r = tx.exec_params(
    "SELECT encode(pubkey, 'hex'), role FROM channel_members "
    "WHERE community_id = $1 AND channel_id = $2 AND removed_at IS NULL ORDER BY pubkey",
    community_id, channel);
  nip29::roster members;
  for (const auto& row : r)
    if (auto role = nip29::parse_role(row[1].as<std::string>()))
      members.emplace(row[0].as<std::string>(), *role);
  return members;
}

void apply_roster_changes(pqxx::work& tx, int64_t community_id, const std::string& channel,
                          const std::string& actor, const std::vector<nip29::roster_change>& changes,
                          group_change& out) {
  array_literal put_pk, put_role, gone_pk;
  bool any_put = false, any_gone = false;
  for (const auto& c : changes) {
    if (c.new_role) {
      put_pk.text(c.pubkey);
      put_role.text(std::string(nip29::name_of(*c.new_role)));
      any_put = true;
    } else {
      gone_pk.text(c.pubkey);
      out.removed.push_back(c.pubkey);
      any_gone = true;
    }
  }
  if (any_put)
    // Re-adding a removed member clears the removal; a role change keeps
    // the original added_at.
    tx.exec_params(
      "INSERT INTO channel_members AS m (community_id, channel_id, pubkey, role, added_by) "
      "SELECT $1, $2, decode(u.pk, 'hex'), u.role, decode($3, 'hex') "
      "  FROM unnest($4::text[], $5::text[]) AS u(pk, role) "
      "ON CONFLICT (community_id, channel_id, pubkey) DO UPDATE "
      "   SET role = EXCLUDED.role, "
      "       added_by = CASE WHEN m.removed_at IS NULL THEN m.added_by ELSE EXCLUDED.added_by END, "
      "       added_at = CASE WHEN m.removed_at IS NULL THEN m.added_at ELSE now() END, "
      "       removed_at = NULL, removed_by = NULL",
      community_id, channel, actor, put_pk.str(), put_role.str());
  if (any_gone)
    tx.exec_params(
      "UPDATE channel_members SET removed_at = now(), removed_by = decode($3, 'hex') "
      " WHERE community_id = $1 AND channel_id = $2 AND removed_at IS NULL "
      "   AND pubkey = ANY (SELECT decode(x, 'hex') FROM unnest($4::text[]) AS x)",
      community_id, channel, actor, gone_pk.str());
  out.roster_changed = !changes.empty();
}

std::optional<std::string> opt_text(const std::optional<std::string>& v) { return v; }

void lock_for_command(pqxx::work& tx, int64_t community_id, const nip29::group_command& cmd) {
  const bool changes_membership = cmd.kind != nip29::kind_edit_metadata &&
                                  cmd.kind != nip29::kind_delete_event;
  if (changes_membership)
    lock_exclusive(tx, membership_lock_key(community_id, cmd.group));
  else
    lock_shared(tx, membership_lock_key(community_id, cmd.group));
  if (cmd.kind == nip29::kind_edit_metadata && cmd.ttl_seconds)
    // A TTL change: every commit refreshing this channel's deadline holds the
    // key SHARED, so it either committed before this or waits and then
    // computes its deadline from the new TTL.
    lock_exclusive(tx, channel_ttl_lock_key(community_id, cmd.group));
}

bool stored_before(pqxx::work& tx, int64_t community_id, const std::string& id) {
  return is_hex64(id) &&
         !tx.exec_params("SELECT 1 FROM events WHERE community_id = $1 AND id = decode($2, 'hex')",
                         community_id, id)
            .empty();
}

// The rules of the command on the facts read under its lock: the roster
// changes it asks for (none but for 9000, 9001, 9021 and 9022), or why not.
result<std::vector<nip29::roster_change>> check_command(const nip29::group_command& cmd,
                                                        const std::string& actor,
                                                        const nip29::channel_view& channel,
                                                        const nip29::roster& members) {
  switch (cmd.kind) {
    case nip29::kind_create_group:
      if (auto st = nip29::may_create(channel); !st.ok())
        return st;
      return std::vector<nip29::roster_change>{};
    case nip29::kind_put_user:
    case nip29::kind_remove_user:
    case nip29::kind_join_request:
    case nip29::kind_leave_request:
      return nip29::plan_membership(cmd, actor, channel, members);
    default:
      if (auto st = nip29::authorize(cmd, actor, channel, members); !st.ok())
        return st;
      return std::vector<nip29::roster_change>{};
  }
}

// An outcome that changed nothing: the transaction rolls back.
command_outcome unchanged(pqxx::work& tx, write_result result) {
  tx.abort();
  return {std::move(result), {}};
}

// 9007 creates the channel before its event is stored (the event is the
// channel's first, with `h` naming it).
void create_channel(pqxx::work& tx, int64_t community_id, const nip29::group_command& cmd,
                    const std::string& actor) {
  std::optional<int32_t> ttl = cmd.ttl_seconds.value_or(std::nullopt);
  tx.exec_params(
    "INSERT INTO channels (community_id, id, name, about, picture, visibility, ttl_seconds, "
    "                      ttl_deadline, created_by) "
    "VALUES ($1, $2, $3, $4, $5, $6, $7, "
    "        CASE WHEN $7::int IS NULL THEN NULL "
    "             ELSE clock_timestamp() + make_interval(secs => $7::int) END, "
    "        decode($8, 'hex'))",
    community_id, cmd.group, cmd.name.value_or(""), cmd.about.value_or(""),
    cmd.picture.value_or(""), cmd.is_private.value_or(false) ? "private" : "open",
    ttl, actor);
}

// 9005, before the command's own event is written: that write ends with its
// TTL refresh, which locks an ephemeral channel's row, and an ingest batch
// locks event rows (NIP-09, replacement) before that same row. Event rows
// first, in key order, on both paths.
void delete_channel_events(pqxx::work& tx, int64_t community_id,
                           const nip29::group_command& cmd) {
  array_literal ids;
  for (const auto& id : cmd.event_ids)
    ids.bytea_hex(id);
  // Only events of this channel: a moderator's reach ends at its border.
  tx.exec_params(
    "UPDATE events e SET deleted_at = now() "
    "  FROM (SELECT x.community_id, x.id FROM events x "
    "         WHERE x.community_id = $1 AND x.id = ANY($2::bytea[]) AND x.channel = $3 "
    "           AND x.deleted_at IS NULL ORDER BY x.id FOR UPDATE) AS t "
    " WHERE e.community_id = t.community_id AND e.id = t.id",
    community_id, ids.str(), cmd.group);
}

void edit_metadata(pqxx::work& tx, int64_t community_id, const nip29::group_command& cmd,
                   const nip29::channel_view& before, group_change& out) {
  std::optional<std::string> visibility;
  if (cmd.is_private)
    visibility = *cmd.is_private ? "private" : "open";
  bool ttl_given = cmd.ttl_seconds.has_value();
  std::optional<int32_t> ttl = ttl_given ? *cmd.ttl_seconds : std::nullopt;
  tx.exec_params(
    "UPDATE channels SET name = coalesce($3, name), about = coalesce($4, about), "
    "       picture = coalesce($5, picture), visibility = coalesce($6, visibility), "
    "       ttl_seconds = CASE WHEN $7 THEN $8::int ELSE ttl_seconds END, "
    "       ttl_deadline = CASE WHEN NOT $7 THEN ttl_deadline "
    "                           WHEN $8::int IS NULL THEN NULL "
    "                           ELSE clock_timestamp() + make_interval(secs => $8::int) END "
    " WHERE community_id = $1 AND id = $2",
    community_id, cmd.group, opt_text(cmd.name), opt_text(cmd.about), opt_text(cmd.picture),
    visibility, ttl_given, ttl);
  out.metadata_changed = true;
  out.became_private = before.open && cmd.is_private.value_or(false);
}

void delete_group(pqxx::work& tx, int64_t community_id, const std::string& channel,
                  group_change& out) {
  tx.exec_params("UPDATE channels SET deleted_at = now() WHERE community_id = $1 AND id = $2",
                 community_id, channel);
  // The relay-signed state goes with the group (all versions are already
  // superseded but the head).
  tx.exec_params(
    "UPDATE events SET deleted_at = now() "
    " WHERE community_id = $1 AND d_tag = $2 AND kind BETWEEN 39000 AND 39003 "
    "   AND deleted_at IS NULL",
    community_id, channel);
  out.deleted = true;
}

// The command's change once its event is stored.
void apply_change(pqxx::work& tx, int64_t community_id, const nip29::group_command& cmd,
                  const std::string& actor, const nip29::channel_view& before,
                  const std::vector<nip29::roster_change>& roster_changes, group_change& out) {
  switch (cmd.kind) {
    case nip29::kind_create_group:
    case nip29::kind_put_user:
    case nip29::kind_remove_user:
    case nip29::kind_join_request:
    case nip29::kind_leave_request:
      apply_roster_changes(tx, community_id, cmd.group, actor, roster_changes, out);
      break;
    case nip29::kind_edit_metadata:
      edit_metadata(tx, community_id, cmd, before, out);
      break;
    case nip29::kind_delete_event:
      break;  // done before the command's own event was written
    case nip29::kind_delete_group:
      delete_group(tx, community_id, cmd.group, out);
      break;
    default:
      break;
  }
}

}  // namespace

command_outcome apply_group_command(pqxx::connection& conn, int64_t community_id,
                                    const event_ptr& ev) {
  command_outcome out;
  auto parsed = nip29::parse_group_command(*ev);
  if (!parsed) {
    out.result = {write_outcome::rejected, parsed.error().reason};
    return out;
  }
  const auto& cmd = *parsed;
  const auto& actor = ev->pubkey;
  out.change.channel = cmd.group;

  pqxx::work tx(conn);
  lock_for_command(tx, community_id, cmd);

  // A command already stored (same id) was applied when it was first stored:
  // `duplicate`, whatever the rules say about it now (a retried 9007 is not
  // "group already exists"; a re-sent 9000 by a since-demoted admin is not
  // refused). Under an EXCLUSIVE lock a concurrent copy has committed by now;
  // under a SHARED one (9002, 9005) write_events still answers `duplicate`.
  if (stored_before(tx, community_id, ev->id))
    return unchanged(tx, {write_outcome::duplicate, ""});

  auto channel = read_channel(tx, community_id, cmd.group);
  auto members = read_roster(tx, community_id, cmd.group);
  auto planned = check_command(cmd, actor, channel.view, members);
  if (!planned) {
    const auto& st = planned.error();
    return unchanged(
      tx, {st.code == ec::invalid ? write_outcome::rejected : write_outcome::refused, st.reason});
  }
  auto roster_changes = std::move(*planned);

  if (cmd.kind == nip29::kind_create_group) {
    create_channel(tx, community_id, cmd, actor);
    roster_changes.push_back({actor, nip29::role::owner});
    out.change.metadata_changed = true;
  }
  if (cmd.kind == nip29::kind_delete_event)
    delete_channel_events(tx, community_id, cmd);

  write_options opts;
  opts.group_commands_authorized = true;
  auto written = write_events(tx, {ingest_item{community_id, ev}}, opts);
  out.result = written.at(0);
  if (out.result.outcome != write_outcome::stored)
    // A duplicate command (same id) was applied when it was first stored.
    return unchanged(tx, out.result);

  apply_change(tx, community_id, cmd, actor, channel.view, roster_changes, out.change);
  tx.commit();
  return out;
}

roster_publication publish_roster(
  pqxx::connection& conn, int64_t community_id, const std::string& channel,
  const relay_signer& signer, int64_t now,
  const std::function<void(const nip29::roster&)>& after_capture) {
  roster_publication out;
  pqxx::work tx(conn);
  // Replacement first (the order every writer of these coordinates uses,
  // including the fence trigger's own membership lock after it), then the
  // membership lock SHARED: captures run concurrently with each other only
  // across channels (same channel: the replacement locks serialise them),
  // and no membership change can commit until this transaction ends.
  {
    array_literal keys;
    for (int32_t kind : {nip29::kind_group_metadata, nip29::kind_group_admins,
                         nip29::kind_group_members})
      keys.text(replacement_lock_key(community_id, kind, signer.pubkey, channel));
    tx.exec_params(
      "SELECT count(pg_advisory_xact_lock(k.h)) "
      "  FROM (SELECT DISTINCT hashtextextended(x, 0) AS h FROM unnest($1::text[]) AS x "
      "        ORDER BY 1) AS k",
      keys.str());
  }
  lock_shared(tx, membership_lock_key(community_id, channel));

  auto row = read_channel(tx, community_id, channel);
  if (!row.view.exists || row.view.deleted) {
    tx.abort();
    return out;
  }
  auto r = tx.exec_params(
    "SELECT name, about, picture FROM channels WHERE community_id = $1 AND id = $2",
    community_id, channel);
  out.members = read_roster(tx, community_id, channel);
  if (after_capture)
    after_capture(out.members);

  std::map<int32_t, int64_t> newest;
  for (const auto& h : tx.exec_params(
         "SELECT kind, max(created_at) FROM events "
         " WHERE community_id = $1 AND d_tag = $2 AND kind BETWEEN 39000 AND 39002 "
         "   AND pubkey = decode($3, 'hex') GROUP BY kind",
         community_id, channel, signer.pubkey))
    newest[h[0].as<int32_t>()] = h[1].as<int64_t>();

  nip29::group_metadata md;
  md.id = channel;
  md.name = r[0][0].as<std::string>();
  md.about = r[0][1].as<std::string>();
  md.picture = r[0][2].as<std::string>();
  md.open = row.view.open;
  md.ttl_seconds = row.ttl_seconds;
  md.archived = row.view.archived;

  std::vector<ingest_item> items;
  auto make = [&](int32_t kind, std::vector<proto::tag> tags) {
    proto::event ev;
    ev.kind = kind;
    ev.created_at = now;
    if (auto i = newest.find(kind); i != newest.end())
      ev.created_at = std::max(now, i->second + 1);
    ev.tags = std::move(tags);
    proto::sign(ev, signer.secret);
    items.push_back({community_id, std::make_shared<const proto::event>(std::move(ev))});
  };
  make(nip29::kind_group_metadata, nip29::metadata_tags(md));
  make(nip29::kind_group_admins, nip29::admins_tags(channel, out.members));
  make(nip29::kind_group_members, nip29::members_tags(channel, out.members));

  write_options opts;
  opts.relay_pubkey = signer.pubkey;  // the relay's own state: not subject to the community's rules
  auto results = write_events(tx, items, opts);
  for (size_t i = 0; i < items.size(); ++i)
    if (results[i].outcome == write_outcome::stored)
      out.events.push_back(items[i].ev);
  tx.commit();
  return out;
}

std::vector<channel_access> read_channel_access(pqxx::connection& conn, int64_t community_id,
                                                const std::vector<std::string>& channels,
                                                const std::vector<std::string>& pubkeys,
                                                read_budget* budget) {
  array_literal ch, pk;
  for (const auto& c : channels)
    ch.text(c);
  for (const auto& p : pubkeys)
    if (is_hex64(p))
      pk.bytea_hex(p);
  pqxx::nontransaction tx(conn);  // one statement: BEGIN/COMMIT would only add round trips
  before_statement(budget, tx);
  // Prepared once per connection (as read_community_access): it runs twice
  // for every REQ that names a channel.
  conn.prepare("waggle_read_channel_access",
    "SELECT c.id, c.visibility, c.deleted_at IS NOT NULL, c.archived_at IS NOT NULL, "
    "       encode(m.pubkey, 'hex') "
    "  FROM channels c "
    "  LEFT JOIN channel_members m ON m.community_id = c.community_id AND m.channel_id = c.id "
    "        AND m.removed_at IS NULL AND m.pubkey = ANY($3::bytea[]) "
    " WHERE c.community_id = $1 AND c.id = ANY($2::text[])");
  auto r = tx.exec_prepared("waggle_read_channel_access",
    community_id, ch.str(), pk.str());
  tx.commit();
  std::map<std::string, channel_access> by_id;
  for (const auto& c : channels)
    by_id[c].channel = c;  // missing channels: view.exists = false
  for (const auto& row : r) {
    auto& a = by_id[row[0].as<std::string>()];
    a.view.exists = true;
    a.view.open = row[1].as<std::string>() == "open";
    a.view.deleted = row[2].as<bool>();
    a.view.archived = row[3].as<bool>();
    if (!row[4].is_null())
      a.members.push_back(row[4].as<std::string>());
  }
  std::vector<channel_access> out;
  for (auto& [id, a] : by_id)
    out.push_back(std::move(a));
  return out;
}

std::vector<channel_ref> archive_expired_channels(pqxx::connection& conn, int limit) {
  std::vector<channel_ref> due;
  {
    pqxx::read_transaction tx(conn);
    for (const auto& row : tx.exec_params(
           "SELECT community_id, id FROM channels "
           " WHERE ttl_seconds IS NOT NULL AND archived_at IS NULL AND deleted_at IS NULL "
           "   AND ttl_deadline < now() ORDER BY ttl_deadline LIMIT $1",
           limit))
      due.push_back({row[0].as<int64_t>(), row[1].as<std::string>()});
    tx.commit();
  }
  std::vector<channel_ref> archived;
  for (auto& c : due) {
    pqxx::work tx(conn);
    auto got = tx.exec_params("SELECT pg_try_advisory_xact_lock(hashtextextended($1, 0))",
                              channel_ttl_lock_key(c.community_id, c.channel));
    if (!got[0][0].as<bool>()) {
      tx.abort();  // a commit is refreshing the deadline right now
      continue;
    }
    auto r = tx.exec_params(
      "UPDATE channels SET archived_at = now() "
      " WHERE community_id = $1 AND id = $2 AND ttl_seconds IS NOT NULL "
      "   AND archived_at IS NULL AND deleted_at IS NULL AND ttl_deadline < now()",
      c.community_id, c.channel);
    tx.commit();
    if (r.affected_rows() == 1)
      archived.push_back(std::move(c));
  }
  return archived;
}

}  // namespace waggle::db
