#include "db/roster_fence.hpp"

#include <random>
#include <stdexcept>
#include <string>
#include <tuple>

#include <pqxx/except>
#include <pqxx/result>
#include <pqxx/subtransaction>
#include <pqxx/transaction>

#include "db/sql_util.hpp"

namespace waggle::db {

namespace {

constexpr const char* fix_hint =
  "fix: re-apply migrations/0003_roster_fence.sql "
  "(psql \"$DATABASE_URL\" -v ON_ERROR_STOP=1 -f migrations/0003_roster_fence.sql)";

status fence_error(const std::string& what) {
  return make_status(ec::internal, std::string("roster fence (migration ") + roster_fence_migration +
                                     "): " + what + "; " + fix_hint);
}

// `n` random bytes as lowercase hex.
std::string random_hex(size_t n) {
  static thread_local std::mt19937_64 gen{[] {
    std::random_device rd;
    std::seed_seq seq{rd(), rd(), rd(), rd(), rd(), rd(), rd(), rd()};
    return std::mt19937_64(seq);
  }()};
  std::string bytes(n, '\0');
  for (auto& b : bytes)
    b = static_cast<char>(gen() & 0xff);
  return sql::hex_of(bytes);
}

// Trigger type bits (pg_trigger.tgtype, see catalog/pg_trigger.h).
constexpr int trigger_type_row = 1 << 0;
constexpr int trigger_type_before = 1 << 1;
constexpr int trigger_type_insert = 1 << 2;

constexpr const char* probe_channel = "fence-probe";

// The raw JSON of a kind-39002 snapshot whose tags are `tags_json`. Only the
// tags matter to the fence; the signature is never checked by the database.
std::string roster_raw(const std::string& id_hex, const std::string& pubkey_hex,
                       const std::string& tags_json) {
  return "{\"id\":\"" + id_hex + "\",\"pubkey\":\"" + pubkey_hex +
         "\",\"created_at\":1,\"kind\":39002,\"tags\":" + tags_json + ",\"content\":\"\",\"sig\":\"" +
         std::string(128, '0') + "\"}";
}

void insert_roster(pqxx::transaction_base& tx, int64_t community_id, const std::string& id_hex,
                   const std::string& pubkey_hex, const std::string& tags_json) {
  tx.exec_params(
    "INSERT INTO events (community_id, id, pubkey, created_at, kind, d_tag, raw) "
    "VALUES ($1, decode($2, 'hex'), decode($3, 'hex'), 1, 39002, $4, $5)",
    community_id, id_hex, pubkey_hex, std::string(probe_channel),
    roster_raw(id_hex, pubkey_hex, tags_json));
}

}  // namespace

status verify_roster_fence_catalog(pqxx::connection& conn) {
  try {
    pqxx::read_transaction tx(conn);
    auto r = tx.exec(
      "SELECT to_regclass('events') IS NOT NULL, "
      "       to_regprocedure('waggle_roster_fence()')::oid, "
      "       t.oid IS NOT NULL, t.tgisinternal, t.tgtype::int, t.tgenabled::text, "
      "       t.tgfoid, t.tgfoid::regprocedure::text "
      "  FROM (SELECT 1) AS one "
      "  LEFT JOIN pg_trigger t "
      "    ON t.tgrelid = to_regclass('events') AND t.tgname = 'waggle_roster_fence'");
    const auto row = r[0];
    if (!row[0].as<bool>())
      return fence_error("table events does not exist (migrations not applied?)");
    const bool have_function = !row[1].is_null();
    if (!row[2].as<bool>())
      return fence_error(std::string("trigger waggle_roster_fence on events is missing") +
                         (have_function ? "" : " (and so is the function waggle_roster_fence())"));
    if (row[3].as<bool>())
      return fence_error("trigger waggle_roster_fence on events is an internal trigger, not the "
                         "migration's");
    if (!have_function)
      return fence_error("function waggle_roster_fence() is missing; the trigger is bound to " +
                         row[7].as<std::string>());
    if (row[6].as<std::string>() != row[1].as<std::string>())
      return fence_error("trigger waggle_roster_fence is bound to another function (" +
                         row[7].as<std::string>() + ", not waggle_roster_fence())");
    const int type = row[4].as<int>();
    if ((type & trigger_type_before) == 0 || (type & trigger_type_insert) == 0 ||
        (type & trigger_type_row) == 0)
      return fence_error("trigger waggle_roster_fence has the wrong timing (tgtype " +
                         std::to_string(type) + "; it must be BEFORE INSERT FOR EACH ROW)");
    const auto enabled = row[5].as<std::string>();
    if (enabled != "O" && enabled != "A")
      return fence_error("trigger waggle_roster_fence on events is disabled (tgenabled '" + enabled +
                         "'" + (enabled == "R" ? ": fires only in replica sessions" : "") + ")");
    // Its two companions: the same check at COMMIT, and the membership lock
    // taken by every change of channel_members, whoever makes it.
    for (const auto& [table, trigger, function] :
         {std::tuple{"events", "waggle_roster_fence_at_commit", "waggle_roster_fence_at_commit()"},
          std::tuple{"channel_members", "waggle_membership_change_lock",
                     "waggle_membership_change_lock()"}}) {
      auto c = tx.exec_params(
        "SELECT t.tgenabled::text, t.tgfoid = to_regprocedure($3) FROM pg_trigger t "
        " WHERE t.tgrelid = to_regclass($1) AND t.tgname = $2 AND NOT t.tgisinternal",
        table, trigger, function);
      if (c.empty())
        return fence_error(std::string("trigger ") + trigger + " on " + table + " is missing");
      auto state = c[0][0].as<std::string>();
      if (state != "O" && state != "A")
        return fence_error(std::string("trigger ") + trigger + " on " + table +
                           " is disabled (tgenabled '" + state + "')");
      if (c[0][1].is_null() || !c[0][1].as<bool>())
        return fence_error(std::string("trigger ") + trigger + " is not bound to " + function);
    }
    return {};
  } catch (const pqxx::broken_connection& e) {
    return make_status(ec::unavailable,
                       std::string("database unavailable while checking the roster fence: ") + e.what());
  } catch (const std::exception& e) {
    return fence_error(std::string("the catalog check failed: ") + e.what());
  }
}

status probe_roster_fence(pqxx::connection& conn) {
  try {
    // Never committed: the destructor rolls back whatever happens below, and
    // the explicit abort() does so on the normal paths.
    pqxx::work tx(conn, "roster_fence_probe");
    // The trigger compares with channel_members after its lock is granted;
    // only READ COMMITTED gives that statement a snapshot taken after the
    // lock. Under REPEATABLE READ or SERIALIZABLE it would compare with the
    // membership of the transaction's first statement and let a stale list
    // through. pqxx::work does not set a level, so a role or database
    // default_transaction_isolation decides it for the writers' sessions.
    const auto isolation =
      tx.exec("SELECT current_setting('transaction_isolation')")[0][0].as<std::string>();
    if (isolation != "read committed")
      return make_status(
        ec::internal,
        std::string("roster fence (migration ") + roster_fence_migration +
          "): this session's transactions run at " + isolation +
          " (default_transaction_isolation), where the fence compares a roster with a membership "
          "older than its lock; fix: run the writers at read committed (ALTER ROLE/DATABASE ... "
          "SET default_transaction_isolation = 'read committed', or unset it)");
    const std::string host = "fence-probe-" + random_hex(16) + ".invalid";
    const std::string member = random_hex(32);
    const int64_t cid =
      tx.exec_params1("INSERT INTO communities (host, name) VALUES ($1, 'roster fence probe') "
                      "RETURNING id",
                      host)[0]
        .as<int64_t>();
    tx.exec_params(
      "INSERT INTO channels (community_id, id, name, created_by) "
      "VALUES ($1, $2, 'roster fence probe', decode($3, 'hex'))",
      cid, std::string(probe_channel), member);
    tx.exec_params(
      "INSERT INTO channel_members (community_id, channel_id, pubkey, role, added_by) "
      "VALUES ($1, $2, decode($3, 'hex'), 'owner', decode($3, 'hex'))",
      cid, std::string(probe_channel), member);

    const std::string relay = random_hex(32);
    const std::string d_tag = std::string("[\"d\",\"") + probe_channel + "\"]";
    const std::string canonical_id = random_hex(32);
    try {
      insert_roster(tx, cid, canonical_id, relay,
                    "[" + d_tag + ",[\"p\",\"" + member + "\",\"\",\"owner\"]]");
    } catch (const pqxx::sql_error& e) {
      return fence_error("the roster fence refused a canonical roster (SQLSTATE " + e.sqlstate() +
                         "): " + e.what());
    }

    bool stale_inserted = false;
    {
      pqxx::subtransaction sub(tx, "roster_fence_probe_stale");
      // Replaced the way a writer replaces a head (the unique live
      // coordinate index would refuse a second live one): the canonical
      // row deleted, then the stale one (its member missing) inserted.
      // libpqxx 6.4 issues a subtransaction's SAVEPOINT lazily, from
      // exec() only: exec_params() bypasses it, so the first statement here
      // must be a plain exec() (the values are our own integer and hex).
      std::string soft_delete = "UPDATE events SET deleted_at = now() WHERE community_id = ";
      soft_delete += std::to_string(cid);
      soft_delete += " AND id = decode('";
      soft_delete += canonical_id;  // our own random hex: nothing to quote
      soft_delete += "', 'hex')";
      sub.exec(soft_delete);
      try {
        insert_roster(sub, cid, random_hex(32), relay, "[" + d_tag + "]");
        stale_inserted = true;
      } catch (const pqxx::sql_error& e) {
        if (e.sqlstate() != "23514")
          return fence_error("a stale roster failed with SQLSTATE " + e.sqlstate() +
                             " instead of 23514 (check_violation): " + e.what());
      }
      // Leaving the scope rolls the savepoint back.
    }
    if (stale_inserted) {
      const auto role = tx.exec("SELECT current_setting('session_replication_role')")[0][0]
                          .as<std::string>();
      tx.abort();
      return fence_error(
        "the roster fence trigger is inert: a stale roster inserted" +
        (role == "replica"
           ? std::string(" (this session has session_replication_role = replica, so triggers "
                         "do not fire; connect without it)")
           : std::string(" (the function body does not check, or the trigger does not fire)")));
    }
    // The comparison is only a fence if it runs under the channel's
    // membership lock, SHARED (docs/lock-protocol.md): the trigger must have taken it
    // (for the canonical insert, outside the rolled-back savepoint).
    // A bigint advisory key shows in pg_locks as classid (high 32 bits) and
    // objid (low 32 bits) with objsubid 1.
    const bool locked =
      tx.exec_params1(
          "SELECT EXISTS (SELECT 1 FROM pg_locks l "
          " WHERE l.locktype = 'advisory' AND l.pid = pg_backend_pid() AND l.granted "
          "   AND l.mode = 'ShareLock' AND l.objsubid = 1 "
          "   AND ((l.classid::bigint << 32) | l.objid::bigint) = "
          "       hashtextextended('waggle_membership:' || $1 || ':' || $2, 0))",
          cid, std::string(probe_channel))[0]
        .as<bool>();
    if (!locked) {
      tx.abort();
      return fence_error(
        "the roster fence trigger does not take the channel's membership lock "
        "(waggle_membership:<community>:<channel>, SHARED), so it compares with a membership "
        "that can change before the roster commits");
    }

    tx.abort();
    return {};
  } catch (const pqxx::broken_connection& e) {
    return make_status(ec::unavailable,
                       std::string("database unavailable while probing the roster fence: ") + e.what());
  } catch (const std::exception& e) {
    return fence_error(std::string("the probe failed: ") + e.what());
  }
}

status check_roster_fence(pqxx::connection& conn) {
  auto catalog = verify_roster_fence_catalog(conn);
  if (!catalog.ok())
    return catalog;
  return probe_roster_fence(conn);
}

std::vector<std::pair<int64_t, std::string>> stale_rosters(pqxx::connection& conn,
                                                           const std::string& relay_pubkey) {
  if (!sql::is_hex64(relay_pubkey))
    throw std::invalid_argument("stale_rosters: relay pubkey is not 64 lowercase hex");
  pqxx::read_transaction tx(conn);
  // The head look-up repeats the partial predicate of events_live_coordinate
  // (deleted_at IS NULL, a constant addressable kind) and its key expression
  // coalesce(d_tag, ''), so it is one unique-index probe per channel.
  auto r = tx.exec_params(
    "SELECT c.community_id, c.id "
    "  FROM channels c "
    "  LEFT JOIN LATERAL ( "
    "    SELECT e.raw FROM events e "
    "     WHERE e.community_id = c.community_id AND e.kind = 39002 "
    "       AND e.pubkey = decode($1, 'hex') AND coalesce(e.d_tag, '') = c.id "
    "       AND e.deleted_at IS NULL "
    "  ) head ON TRUE "
    " WHERE c.deleted_at IS NULL "
    "   AND (head.raw IS NULL "
    "        OR waggle_roster_mismatch(c.community_id, c.id, head.raw) IS NOT NULL) "
    " ORDER BY c.community_id, c.id",
    relay_pubkey);
  std::vector<std::pair<int64_t, std::string>> out;
  out.reserve(r.size());
  for (const auto& row : r)
    out.emplace_back(row[0].as<int64_t>(), row[1].as<std::string>());
  return out;
}

}  // namespace waggle::db
