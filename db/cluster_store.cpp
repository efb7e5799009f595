#include "db/cluster_store.hpp"

#include <tuple>

#include <pqxx/binarystring>
#include <pqxx/result>
#include <pqxx/nontransaction>

namespace waggle::db::cluster {

namespace {

std::string hex(const std::string& bytes) {
  static const char* digits = "0123456789abcdef";
  std::string out;
  out.reserve(bytes.size() * 2);
  for (unsigned char c : bytes) {
    out += digits[c >> 4];
    out += digits[c & 15];
  }
  return out;
}

}  // namespace

committed_page fetch_committed(
  pqxx::connection& conn, const std::string& since, const std::string& upto,
  const std::optional<std::tuple<std::string, int64_t, std::string>>& after, page_bounds bounds,
  const std::string& received_since) {
  pqxx::nontransaction tx(conn);
  // A row is in the window when `upto` sees its transaction committed and
  // `since` does not: its id is at or above since's xmax, or was in progress
  // at since (its xip). Two index probes, each ordered and cut by count: not
  // a range from since's xmin filtered row by row, which one old open
  // transaction anywhere (its id holds xmin down) would stretch over
  // everything committed since it began.
  //
  // Deleted rows are left out, except the commands that end access to a
  // channel: deleted before another node read them (a 9005, a NIP-09, the
  // expiry reaper), they must still end the subscriptions there, so they
  // come flagged and are never delivered.
  auto branch = [](const std::string& window) {
    return std::string{
             "  (SELECT e.community_id, e.commit_xid, e.id, e.raw, e.deleted_at IS NOT NULL AS gone"
             "     FROM events e, cur"
             "    WHERE e.commit_xid < pg_snapshot_xmax(cur.s)"
             "      AND pg_visible_in_snapshot(e.commit_xid, cur.s)"} +
           window +
           "      AND (e.deleted_at IS NULL OR e.kind IN (9001, 9002, 9008, 9022))"
           "      AND (nullif($3, '') IS NULL OR (e.commit_xid, e.community_id, e.id)"
           "           > (nullif($3, '')::xid8, $4::bigint, decode($5, 'hex')))"
           "    ORDER BY e.commit_xid, e.community_id, e.id"
           "    LIMIT $6)";
  };
  // After a server change, transaction ids that were handed out but never
  // reached the disk may be handed out again, below `since`'s horizon, to
  // transactions `since` would call finished. Such a transaction began
  // after the restart, so after `since` was read (received_at is when its
  // transaction began): a row is new if `since` did not see it committed,
  // or if it began after `since` was read. That read scans from a million
  // ids below `since` (more than a crash loses: the WAL writer flushes every
  // 200 ms); it happens once per server change.
  const std::string rows =
    received_since.empty()
      ? branch("      AND e.commit_xid >= pg_snapshot_xmax($1::pg_snapshot) AND $8 = ''") +
          " UNION ALL " +
          branch("      AND e.commit_xid = ANY (ARRAY(SELECT pg_snapshot_xip($1::pg_snapshot)))")
      : branch("      AND e.commit_xid >= greatest(pg_snapshot_xmin($1::pg_snapshot)::text::numeric"
               "                                   - 1000000, 3)::text::xid8"
               "      AND (NOT pg_visible_in_snapshot(e.commit_xid, $1::pg_snapshot)"
               "           OR e.received_at >= $8::timestamptz)");
  auto r = tx.exec_params(
    "WITH cur AS (SELECT coalesce(nullif($2, '')::pg_snapshot, pg_current_snapshot()) AS s),"
    " cut AS (SELECT u.* FROM (" + rows + ") u"
    "   ORDER BY u.commit_xid, u.community_id, u.id LIMIT $6),"
    " page AS ("
    "  SELECT c.*, sum(octet_length(c.raw)) OVER (ORDER BY c.commit_xid, c.community_id, c.id)"
    "                - octet_length(c.raw) AS before"
    "    FROM cut c)"
    " SELECT cur.s::text, p.community_id, p.commit_xid::text, p.id, p.raw,"
    "        (SELECT count(*) FROM page), clock_timestamp()::text, p.gone"
    "   FROM cur LEFT JOIN page p ON p.before = 0 OR p.before < $7"
    "  ORDER BY p.commit_xid, p.community_id, p.id",
    since, upto, after ? std::get<0>(*after) : std::string{}, after ? std::get<1>(*after) : 0,
    after ? hex(std::get<2>(*after)) : std::string{}, bounds.rows, bounds.bytes, received_since);
  committed_page out;
  if (r.empty())
    return out;
  out.snapshot = r[0][0].c_str();
  out.read_at = r[0][6].c_str();
  int64_t in_page = r[0][5].as<int64_t>();
  for (const auto& row : r) {
    if (row[1].is_null())
      continue;
    pqxx::binarystring id(row[3]);
    out.rows.push_back(committed_row{row[1].as<int64_t>(), row[2].c_str(), id.str(),
                                     row[4].c_str(), row[7].as<bool>()});
  }
  out.more = in_page >= bounds.rows || static_cast<int64_t>(out.rows.size()) < in_page;
  return out;
}

std::vector<access_change> fetch_access_changes(pqxx::connection& conn, const std::string& since,
                                                const std::string& upto,
                                                const std::string& received_since) {
  pqxx::nontransaction tx(conn);
  // The same window rule as fetch_committed (see there), with `at` (the
  // change's transaction start) in place of received_at.
  const std::string window =
    received_since.empty()
      ? "   AND (c.commit_xid >= pg_snapshot_xmax($1::pg_snapshot)"
        "        OR c.commit_xid = ANY (ARRAY(SELECT pg_snapshot_xip($1::pg_snapshot))))"
        "   AND $3 = ''"
      : "   AND c.commit_xid >= greatest(pg_snapshot_xmin($1::pg_snapshot)::text::numeric"
        "                                 - 1000000, 3)::text::xid8"
        "   AND (NOT pg_visible_in_snapshot(c.commit_xid, $1::pg_snapshot)"
        "        OR c.at >= $3::timestamptz)";
  auto r = tx.exec_params(
    "SELECT c.community_id, c.commit_xid::text, c.seq, coalesce(encode(c.pubkey, 'hex'), '')"
    "  FROM community_changes c JOIN communities m ON m.id = c.community_id"
    " WHERE c.commit_xid < pg_snapshot_xmax($2::pg_snapshot)"
    "   AND pg_visible_in_snapshot(c.commit_xid, $2::pg_snapshot)" +
      window +
      "   AND (c.change IN ('removed', 'banned')"
      "        OR (c.change = 'policy' AND m.policy <> 'open'))"
      " ORDER BY c.commit_xid, c.seq",
    since, upto, received_since);
  std::vector<access_change> out;
  for (const auto& row : r)
    out.push_back(access_change{row[0].as<int64_t>(), row[1].c_str(), row[2].as<int64_t>(),
                                row[3].c_str()});
  return out;
}

std::vector<std::string> live_node_ids(pqxx::connection& conn, const std::string& self,
                                       std::chrono::seconds ttl) {
  pqxx::nontransaction tx(conn);
  auto r = tx.exec_params(
    "SELECT node_id FROM bus_nodes"
    " WHERE node_id <> $1 AND heartbeat_at > now() - make_interval(secs => $2)"
    " ORDER BY node_id",
    self, static_cast<int64_t>(ttl.count()));
  std::vector<std::string> out;
  for (const auto& row : r)
    out.emplace_back(row[0].c_str());
  return out;
}

void announce(pqxx::connection& conn, const std::string& node_id, int protocol_version) {
  pqxx::nontransaction tx(conn);
  tx.exec_params(
    "INSERT INTO bus_nodes (node_id, protocol_version) VALUES ($1, $2)"
    " ON CONFLICT (node_id) DO UPDATE SET heartbeat_at = now()",
    node_id, protocol_version);
}

void note_gate_intent(pqxx::connection& conn, int64_t community_id) {
  pqxx::nontransaction tx(conn);
  tx.exec_params(
    "INSERT INTO push_gate_intents (community_id) VALUES ($1)"
    " ON CONFLICT (community_id) DO UPDATE SET noted_at = now()",
    community_id);
}

std::vector<int64_t> gate_communities(pqxx::connection& conn) {
  pqxx::nontransaction tx(conn);  // one statement, one snapshot
  std::vector<int64_t> out;
  auto r = tx.exec(
    "SELECT l.community_id FROM push_leases l"
    "  WHERE waggle_push_lease_live(l, extract(epoch FROM now())::bigint)"
    " UNION"
    " SELECT community_id FROM push_gate_intents"
    "  WHERE noted_at > now() - interval '10 minutes'"
    " ORDER BY 1");
  for (const auto& row : r)
    out.push_back(row[0].as<int64_t>());
  return out;
}

std::string registry_json(pqxx::connection& conn, std::chrono::seconds ttl) {
  pqxx::nontransaction tx(conn);
  // The database renders it: every text is escaped by json_build_object.
  auto r = tx.exec_params(
    "SELECT coalesce(json_agg(json_build_object("
    "         'node_id', node_id, 'address', address, 'port', port,"
    "         'protocol_version', protocol_version,"
    "         'started_at', extract(epoch FROM started_at)::bigint,"
    "         'heartbeat_age_ms', (extract(epoch FROM now() - heartbeat_at) * 1000)::bigint,"
    "         'live', heartbeat_at > now() - make_interval(secs => $1))"
    "         ORDER BY node_id), '[]')::text"
    "  FROM bus_nodes",
    static_cast<int64_t>(ttl.count()));
  return r[0][0].c_str();
}

}  // namespace waggle::db::cluster
