#include "db/bus_store.hpp"

#include <algorithm>
#include <stdexcept>
#include <string_view>

#include <pqxx/binarystring>
#include <pqxx/except>
#include <pqxx/result>
#include <pqxx/nontransaction>
#include <pqxx/transaction>

#include "db/conninfo.hpp"
#include "db/sql_util.hpp"

namespace waggle::db::bus {

namespace {

std::string hex(const std::string& bytes) {
  static constexpr char digits[] = "0123456789abcdef";
  std::string out;
  out.reserve(bytes.size() * 2);
  for (unsigned char c : bytes) {
    out.push_back(digits[c >> 4]);
    out.push_back(digits[c & 15]);
  }
  return out;
}

std::string text_array(const std::vector<std::string>& values) {
  sql::array_literal a;
  for (const auto& v : values)
    a.text(v);
  return a.str();
}

}  // namespace

std::unique_ptr<pqxx::connection> open(const std::string& url, const std::string& role,
                                       std::chrono::milliseconds statement_timeout) {
  using namespace std::chrono_literals;
  auto conn = std::make_unique<pqxx::connection>(guarded_conninfo(url, "bus-" + role, 10s));
  // A broken connection throws, never reconnects behind the driver's back:
  // the actor that owns it decides, and a reconnect is never unnoticed (a
  // silent one would drop this SET, and a listener's LISTENs, unseen).
  conn->inhibit_reactivation(true);
  pqxx::nontransaction tx(*conn);
  // Server markers and read_to_at travel as text and are compared as text:
  // pin the rendering so a server's TimeZone or DateStyle cannot change it.
  tx.exec("SET TimeZone = 'UTC'; SET DateStyle = 'ISO, YMD'");
  if (statement_timeout.count() > 0)
    tx.exec("SET statement_timeout = " + std::to_string(statement_timeout.count()));
  return conn;
}

std::vector<published> publish(pqxx::connection& conn, const std::vector<outgoing>& batch,
                               std::chrono::seconds node_ttl) {
  std::vector<published> out(batch.size());
  // Plain messages go in one statement (one round trip for the whole batch:
  // a statement per message made the round trips the driver's bottleneck);
  // requests, stored only if someone listens, one by one.
  sql::array_literal shards, hashes, subjects, replies, payloads;
  std::vector<size_t> plain;
  for (size_t i = 0; i < batch.size(); ++i) {
    const auto& m = batch[i];
    if (m.needs_responders)
      continue;
    plain.push_back(i);
    shards.integer(m.shard);
    hashes.integer(m.subject_hash);
    subjects.text(m.subject);
    replies.text(m.reply_to);
    payloads.bytea_hex(hex(m.payload));
  }
  pqxx::work tx(conn);
  // Durable enough for at-most-once, without waiting for the WAL flush.
  tx.exec("SET LOCAL synchronous_commit = off");
  if (!plain.empty()) {
    // Ids come from the sequence in the order the rows are inserted, which
    // ORDER BY n makes the batch's order: sorted, they map back to it.
    auto r = tx.exec_params(
      "INSERT INTO bus_messages (shard, subject_hash, subject, reply_to, payload)"
      " SELECT shard, hash, subject, reply_to, payload"
      "   FROM unnest($1::smallint[], $2::bigint[], $3::text[], $4::text[], $5::bytea[])"
      "        WITH ORDINALITY AS m(shard, hash, subject, reply_to, payload, n)"
      "  ORDER BY n RETURNING id",
      shards.str(), hashes.str(), subjects.str(), replies.str(), payloads.str());
    std::vector<int64_t> ids;
    ids.reserve(r.size());
    for (const auto& row : r)
      ids.push_back(row[0].as<int64_t>());
    if (ids.size() != plain.size())
      throw std::runtime_error("bus publish stored " + std::to_string(ids.size()) + " of " +
                               std::to_string(plain.size()) + " messages");
    std::sort(ids.begin(), ids.end());
    for (size_t k = 0; k < plain.size(); ++k)
      out[plain[k]].id = ids[k];
  }
  for (size_t i = 0; i < batch.size(); ++i) {
    const auto& m = batch[i];
    if (!m.needs_responders)
      continue;
    pqxx::binarystring payload(m.payload.data(), m.payload.size());
    auto r = tx.exec_params(
      "INSERT INTO bus_messages (shard, subject_hash, subject, reply_to, payload)"
      " SELECT $1::smallint, $2::bigint, $3::text, $4::text, $5::bytea WHERE EXISTS ("
      "   SELECT 1 FROM bus_subscriptions s JOIN bus_nodes n USING (node_id)"
      "    WHERE s.subject_hash = $2 AND s.subject = $3"
      "      AND n.heartbeat_at > now() - make_interval(secs => $6))"
      " RETURNING id",
      m.shard, m.subject_hash, m.subject, m.reply_to, payload,
      static_cast<int64_t>(node_ttl.count()));
    out[i].id = r.empty() ? 0 : r[0][0].as<int64_t>();
  }
  tx.commit();
  return out;
}

page fetch(pqxx::connection& conn, int shard, const std::string& since, const std::string& upto,
           const std::optional<std::pair<std::string, int64_t>>& after,
           const std::vector<std::string>& subjects, fetch_bounds bounds,
           const std::string& published_since) {
  pqxx::nontransaction tx(conn);
  // One statement: the snapshot it takes (when `upto` is empty) and the rows
  // it reads agree. A row is in the page when its transaction committed
  // after `since` and by `upto`; no clock, no gap. (After a server restart,
  // by publish time instead: see fetch() in bus_store.hpp.)
  auto r = tx.exec_params(
    "WITH cur AS (SELECT coalesce(nullif($2, '')::pg_snapshot, pg_current_snapshot()) AS s),"
    " page AS ("
    "  SELECT m.id, m.xid, m.subject, m.reply_to, m.payload, m.published_at,"
    "         sum(octet_length(m.payload)) OVER (ORDER BY m.xid, m.id)"
    "           - octet_length(m.payload) AS before"
    "    FROM bus_messages m, cur"
    "   WHERE m.shard = $3"
    "     AND m.xid < pg_snapshot_xmax(cur.s)"
    "     AND pg_visible_in_snapshot(m.xid, cur.s)"
    + std::string{published_since.empty()
                    ? "     AND m.xid >= pg_snapshot_xmin($1::pg_snapshot)"
                      "     AND NOT pg_visible_in_snapshot(m.xid, $1::pg_snapshot)"
                      "     AND $9 = ''"
                    : "     AND m.published_at >= $9::timestamptz"
                      "     AND $1 <> ''"} +
    "     AND (nullif($4, '') IS NULL OR (m.xid, m.id) > (nullif($4, '')::xid8, $5::bigint))"
    "     AND m.subject = ANY($6::text[])"
    "   ORDER BY m.xid, m.id"
    "   LIMIT $7)"
    " SELECT cur.s::text, p.id, p.xid::text, p.subject, p.reply_to, p.payload,"
    "        extract(epoch FROM clock_timestamp() - p.published_at) * 1000,"
    "        (SELECT count(*) FROM page), clock_timestamp()::text"
    "   FROM cur LEFT JOIN page p ON p.before = 0 OR p.before < $8"
    "  ORDER BY p.xid, p.id",
    since, upto, shard, after ? after->first : std::string{}, after ? after->second : 0,
    text_array(subjects), bounds.rows, bounds.bytes, published_since);
  page out;
  if (r.empty())
    return out;
  out.snapshot = r[0][0].c_str();
  out.read_at = r[0][8].c_str();
  int64_t in_page = r[0][7].as<int64_t>();
  for (const auto& row : r) {
    if (row[1].is_null())
      continue;
    pqxx::binarystring payload(row[5]);
    out.rows.push_back(fetched{row[1].as<int64_t>(), row[2].c_str(), row[3].c_str(),
                               row[4].c_str(), payload.str(), row[6].as<double>()});
  }
  out.more = in_page >= bounds.rows || static_cast<int64_t>(out.rows.size()) < in_page;
  return out;
}

std::string current_snapshot(pqxx::connection& conn, std::string* taken_at) {
  pqxx::nontransaction tx(conn);
  // clock_timestamp() is evaluated after the statement's snapshot: a row
  // published at or after it cannot be in the snapshot.
  auto r = tx.exec("SELECT pg_current_snapshot()::text, clock_timestamp()::text");
  if (taken_at)
    *taken_at = r[0][1].c_str();
  return r[0][0].c_str();
}

std::string server_started(pqxx::connection& conn) {
  pqxx::nontransaction tx(conn);
  // The postmaster's start time changes with a restart or another server;
  // a crash of one backend (restart_after_crash) keeps the postmaster but
  // reinitialises shared memory and replays WAL, discarding the cumulative
  // statistics, which sets stats_reset: that changes then too.
  return tx
    .exec("SELECT pg_postmaster_start_time()::text || ' ' ||"
          "       coalesce((SELECT stats_reset::text FROM pg_stat_bgwriter), '')")[0][0]
    .c_str();
}

std::vector<std::pair<int64_t, std::string>> claim(
  pqxx::connection& conn, const std::string& node,
  const std::vector<std::pair<int64_t, std::string>>& wanted) {
  std::vector<std::pair<int64_t, std::string>> won;
  if (wanted.empty())
    return won;
  sql::array_literal ids, groups;
  for (const auto& [id, group] : wanted) {
    ids.integer(id);
    groups.text(group);
  }
  pqxx::nontransaction tx(conn);
  // A message garbage-collected meanwhile has nothing left to claim. The
  // EXISTS cannot see a delete that commits while the INSERT runs: that
  // one fails the foreign key, and the claim is made again without it.
  pqxx::result r;
  for (int attempt = 0;; ++attempt) {
    try {
      r = tx.exec_params(
        "INSERT INTO bus_claims (message_id, grp, node_id)"
        " SELECT w.id, w.grp, $3 FROM unnest($1::bigint[], $2::text[]) AS w(id, grp)"
        "  WHERE EXISTS (SELECT 1 FROM bus_messages m WHERE m.id = w.id)"
        // A claim this node made already (its answer lost with a broken
        // connection, the page read again) is still its own.
        " ON CONFLICT (message_id, grp) DO UPDATE SET node_id = excluded.node_id"
        "   WHERE bus_claims.node_id = excluded.node_id"
        " RETURNING message_id, grp",
        ids.str(), groups.str(), node);
      break;
    } catch (const pqxx::foreign_key_violation&) {
      if (attempt > 0)
        throw;
    }
  }
  for (const auto& row : r)
    won.emplace_back(row[0].as<int64_t>(), row[1].c_str());
  return won;
}

void register_node(pqxx::connection& conn, const node_row& node,
                   const std::vector<subscription_row>& subscriptions) {
  sql::array_literal subjects, groups, hashes;
  for (const auto& s : subscriptions) {
    subjects.text(s.subject);
    groups.text(s.group);
    hashes.integer(s.subject_hash);
  }
  pqxx::work tx(conn);
  tx.exec_params(
    "INSERT INTO bus_nodes (node_id, address, port, protocol_version) VALUES ($1, $2, $3, $4)"
    " ON CONFLICT (node_id) DO UPDATE SET address = excluded.address, port = excluded.port,"
    "   protocol_version = excluded.protocol_version, started_at = now(), heartbeat_at = now()",
    node.node_id, node.address, node.port, node.protocol_version);
  tx.exec_params(
    "DELETE FROM bus_subscriptions s WHERE s.node_id = $1 AND NOT EXISTS ("
    "  SELECT 1 FROM unnest($2::text[], $3::text[]) AS w(subject, grp)"
    "   WHERE w.subject = s.subject AND w.grp = s.grp)",
    node.node_id, subjects.str(), groups.str());
  tx.exec_params(
    "INSERT INTO bus_subscriptions (node_id, subject, grp, subject_hash)"
    " SELECT $1, w.subject, w.grp, w.hash"
    "   FROM unnest($2::text[], $3::text[], $4::bigint[]) AS w(subject, grp, hash)"
    " ON CONFLICT DO NOTHING",
    node.node_id, subjects.str(), groups.str(), hashes.str());
  tx.commit();
}

bool heartbeat(pqxx::connection& conn, const std::string& node_id) {
  pqxx::nontransaction tx(conn);
  return tx.exec_params("UPDATE bus_nodes SET heartbeat_at = now() WHERE node_id = $1", node_id)
           .affected_rows() == 1;
}

void unregister_node(pqxx::connection& conn, const std::string& node_id) {
  pqxx::nontransaction tx(conn);
  tx.exec_params("DELETE FROM bus_nodes WHERE node_id = $1", node_id);
}

std::vector<node_row> live_nodes(pqxx::connection& conn, const std::string& self,
                                 std::chrono::seconds ttl) {
  pqxx::nontransaction tx(conn);
  auto r = tx.exec_params(
    "SELECT node_id, address, port, protocol_version FROM bus_nodes"
    // Nodes of the PostgreSQL driver register no address: nothing to dial.
    " WHERE node_id <> $1 AND heartbeat_at > now() - make_interval(secs => $2)"
    "   AND address <> '' AND port > 0"
    " ORDER BY node_id",
    self, static_cast<int64_t>(ttl.count()));
  std::vector<node_row> out;
  for (const auto& row : r)
    out.push_back(node_row{row[0].c_str(), row[1].c_str(), row[2].as<int>(), row[3].as<int>()});
  return out;
}

void set_subscribed(pqxx::connection& conn, const std::string& node, const std::string& subject,
                    const std::string& group, int64_t subject_hash, bool subscribed) {
  pqxx::nontransaction tx(conn);
  if (subscribed)
    tx.exec_params(
      "INSERT INTO bus_subscriptions (node_id, subject, grp, subject_hash) VALUES ($1, $2, $3, $4)"
      " ON CONFLICT DO NOTHING",
      node, subject, group, subject_hash);
  else
    tx.exec_params("DELETE FROM bus_subscriptions WHERE node_id = $1 AND subject = $2 AND grp = $3",
                   node, subject, group);
}

// The oldest rows first, found by the published_at index, then deleted by
// primary key (= ANY of an array: a join here made the planner hash-join a
// sequential scan of the whole table). A pass costs its batch, never the table.
const char* const gc_sql =
  "DELETE FROM bus_messages WHERE id = ANY(ARRAY("
  "  SELECT id FROM bus_messages"
  "   WHERE published_at < now() - make_interval(secs => $1)"
  "   ORDER BY published_at LIMIT $2))";

int64_t collect_garbage(pqxx::connection& conn, std::chrono::seconds retention, int batch) {
  pqxx::nontransaction tx(conn);
  return tx.exec_params(gc_sql, static_cast<int64_t>(retention.count()), batch).affected_rows();
}

int64_t expire_nodes(pqxx::connection& conn, std::chrono::seconds expiry) {
  pqxx::nontransaction tx(conn);
  return tx
    .exec_params("DELETE FROM bus_nodes WHERE heartbeat_at < now() - make_interval(secs => $1)",
                 static_cast<int64_t>(expiry.count()))
    .affected_rows();
}

void ring(pqxx::connection& conn, const std::vector<std::string>& channels) {
  pqxx::nontransaction tx(conn);
  tx.exec_params("SELECT pg_notify(c, '') FROM unnest($1::text[]) AS c", text_array(channels));
}

namespace {
constexpr std::string_view channel_prefix = "waggle_bus_";
}

std::string shard_channel(int shard) { return std::string{channel_prefix} + std::to_string(shard); }

int shard_of_channel(const std::string& channel) {
  if (channel.size() <= channel_prefix.size() || channel.size() > channel_prefix.size() + 2 ||
      channel.compare(0, channel_prefix.size(), channel_prefix) != 0)
    return -1;
  int shard = 0;
  for (size_t i = channel_prefix.size(); i < channel.size(); ++i) {
    if (channel[i] < '0' || channel[i] > '9')
      return -1;
    shard = shard * 10 + (channel[i] - '0');
  }
  return shard < 32 ? shard : -1;
}

}  // namespace waggle::db::bus
