#include "db/heartbeat.hpp"

#include <pqxx/nontransaction>
#include <pqxx/result>

namespace waggle::db {

namespace {

// statement_timestamp() is taken when this statement starts, before it reads
// pg_stat_activity, which is what the proof needs (docs/replicas.md). Only
// backends of this database can write its rows; autovacuum never inserts
// events and may run for minutes. A backend of another role shows no
// xact_start to a role without pg_read_all_stats, and a prepared (two-phase)
// transaction is in no backend at all, and a session with track_activities
// off (state 'disabled') publishes no xact_start: with any, nothing is
// provable.
const char* const probe_sql = R"SQL(
WITH act AS MATERIALIZED (
  SELECT min(xact_start) FILTER (WHERE query IS DISTINCT FROM '<insufficient privilege>') AS oldest,
         count(*) FILTER (WHERE query = '<insufficient privilege>' OR state = 'disabled') AS hidden
    FROM pg_stat_activity
   WHERE datid = (SELECT oid FROM pg_database WHERE datname = current_database())
     AND pid <> pg_backend_pid()
     AND backend_type IS DISTINCT FROM 'autovacuum worker'
     AND (xact_start IS NOT NULL OR query = '<insufficient privilege>' OR state = 'disabled')
)
UPDATE replica_heartbeat SET token = token + 1 WHERE id = 1
RETURNING token, epoch,
  extract(epoch FROM least(statement_timestamp(), (SELECT oldest FROM act)))::float8,
  waggle_commit_floor_secs(),
  (SELECT hidden FROM act) = 0 AND current_setting('track_activities') = 'on'
    AND NOT EXISTS (SELECT 1 FROM pg_prepared_xacts WHERE database = current_database())
)SQL";

heartbeat_probe probe_of(const pqxx::result& r) {
  if (r.empty())
    throw std::runtime_error("replica_heartbeat has no row");
  heartbeat_probe p;
  p.token = r[0][0].as<int64_t>();
  p.epoch = r[0][1].as<std::string>();
  p.fence_raw = r[0][2].as<double>();
  p.floor_secs = r[0][3].as<int64_t>();
  p.provable = r[0][4].as<bool>();
  return p;
}

}  // namespace

heartbeat_probe probe_heartbeat(pqxx::connection& conn) {
  pqxx::nontransaction tx{conn};
  return probe_of(tx.exec(probe_sql));
}

heartbeat_probe rotate_heartbeat_epoch(pqxx::connection& conn, int64_t above_token) {
  pqxx::nontransaction tx{conn};
  // The proof of this row's token is not used (the ring starts afresh with
  // the next probe); the token only has to exceed every token of the old
  // history so that tokens keep growing.
  auto r = tx.exec_params(
      "UPDATE replica_heartbeat SET epoch = gen_random_uuid()::text,"
      " token = greatest(token, $1::bigint) + 1 WHERE id = 1"
      " RETURNING token, epoch, extract(epoch FROM statement_timestamp())::float8,"
      " waggle_commit_floor_secs(), false",
      above_token);
  return probe_of(r);
}

std::optional<heartbeat_seen> begin_replica_read(pqxx::connection& conn) {
  pqxx::nontransaction tx{conn};
  // Two statements in one simple query: one round trip, and the SELECT is
  // the first statement of the transaction, so it takes the snapshot.
  auto r = tx.exec(
      "BEGIN ISOLATION LEVEL REPEATABLE READ, READ ONLY;"
      " SELECT token, epoch, (SELECT coalesce(max(version), 0) FROM schema_migrations)"
      " FROM replica_heartbeat WHERE id = 1");
  if (r.empty())
    return std::nullopt;
  return heartbeat_seen{r[0][0].as<int64_t>(), r[0][1].as<std::string>(), r[0][2].as<int>()};
}

void end_replica_read(pqxx::connection& conn) {
  pqxx::nontransaction tx{conn};
  tx.exec("COMMIT");
}

std::optional<double> backfill_watermark(pqxx::connection& conn, int64_t community_id) {
  pqxx::nontransaction tx{conn};
  auto r = tx.exec_params(
      "SELECT extract(epoch FROM max(last_at))::float8 FROM history_backfill "
      "WHERE community_id = $1",
      community_id);
  if (r.empty() || r[0][0].is_null())
    return std::nullopt;
  return r[0][0].as<double>();
}

std::string backend_identity(pqxx::connection& conn) {
  pqxx::nontransaction tx{conn};
  auto r = tx.exec(
      "SELECT coalesce(host(inet_server_addr()) || ':' || inet_server_port(), 'local')"
      " || ' pid=' || pg_backend_pid()");
  return r[0][0].as<std::string>();
}

}  // namespace waggle::db
