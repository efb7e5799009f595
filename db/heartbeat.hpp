#pragma once

// The SQL of the replica freshness proof (docs/replicas.md): the probe the
// heartbeat prober runs on the writer, the epoch rotation after a token
// regression, the first statement of a routed read on a replica, and the
// backfill watermark of a community. Functions take the caller's connection.

#include <cstdint>
#include <optional>
#include <string>

#include <pqxx/connection>

namespace waggle::db {

// One probe, committed on the writer: the fence sampled BEFORE the token's
// commit, so every commit that ended before the sample precedes the token in
// the WAL.
struct heartbeat_probe {
  int64_t token = 0;
  std::string epoch;
  // min(statement start, the oldest open transaction's start in this
  // database), unix seconds (the database's clock).
  double fence_raw = 0;
  int64_t floor_secs = 0;  // waggle_commit_floor_secs()
  // false: the fence could not be sampled soundly (transactions of other
  // roles whose start is hidden from us, or track_activities off); the token
  // was still committed, but the entry must not prove anything.
  bool provable = true;
};

// The probe as ONE autocommit statement (one round trip). Throws pqxx errors.
heartbeat_probe probe_heartbeat(pqxx::connection& conn);

// A new epoch and a token above every token seen: proofs of the old epoch can
// no longer validate a replica (the replica must replay this commit first).
heartbeat_probe rotate_heartbeat_epoch(pqxx::connection& conn, int64_t above_token);

// What a replica shows as the first statement of a routed read.
struct heartbeat_seen {
  int64_t token = 0;
  std::string epoch;
  int schema_version = 0;  // max(schema_migrations.version) on the replica
};

// BEGIN ISOLATION LEVEL REPEATABLE READ, READ ONLY and the heartbeat read in
// ONE round trip: the snapshot of the read is taken by this very statement,
// so the proof binds to the rows the page is read from. nullopt: no
// heartbeat row (a replica older than migration 0010). Throws pqxx errors;
// the transaction is left open (end_replica_read closes it).
std::optional<heartbeat_seen> begin_replica_read(pqxx::connection& conn);
void end_replica_read(pqxx::connection& conn);

// The latest time an event older than the commit floor was inserted in the
// community (unix seconds, database clock), or nullopt. Read on the writer.
std::optional<double> backfill_watermark(pqxx::connection& conn, int64_t community_id);

// "addr:port pid" of the connection's backend ("local" for a Unix socket).
std::string backend_identity(pqxx::connection& conn);

}  // namespace waggle::db
