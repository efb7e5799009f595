#pragma once

// The SQL of the push pipeline (docs/push.md): lease acceptance, the gate in
// the write path, the matcher's batch, the wake outbox's claims and fenced
// completions, and the sweeps. Functions take the caller's connection or
// transaction (docs/actor-rules.md). Keys are bytea in the schema and travel
// as hex text; every value is a parameter of a prepared statement.

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <pqxx/connection>
#include <pqxx/transaction>
#include <pqxx/transaction_base>

#include "db/event_store.hpp"
#include "messages/proto/push.hpp"

namespace waggle::db {

// The channel the gate and the backfill NOTIFY when they added jobs.
inline constexpr const char* push_wake_channel = "waggle_push";

// -- leases ----------------------------------------------------------------------

struct lease_settings {
  int quota = 10;                          // live leases per author and community
  std::chrono::seconds backfill{120};      // an activation re-enqueues this much history
  std::chrono::seconds created_at_window{900};  // the relay's (config created_at_window)
};

// Accepts one lease event in its OWN transaction (docs/push.md, "Leases"):
// the write path stores the event (replacing the older version at its
// address), then waggle_accept_lease (migrations/0009) takes the author lock
// and, for the activation, push_gate EXCLUSIVE, checks the generation, the
// quota and the endpoint, upserts push_leases and backfills. Any refusal
// rolls everything back and is answered as a protocol outcome. `skipped`:
// events this node stored without the gate statement while it believed the
// community had no lease (hex ids, enqueued by the backfill).
write_result accept_lease_event(pqxx::connection& conn, const ingest_item& item,
                                const write_options& opts, const lease_settings& settings,
                                const std::vector<std::string>& skipped, int64_t now);

// The communities with a live lease now (the gate cache's start).
std::vector<int64_t> live_lease_communities(pqxx::connection& conn);

// -- the gate (in the write path's transaction) --------------------------------

struct gated_event {
  int64_t community_id = 0;
  std::string id;  // 64 hex
  int32_t kind = 0;
};
// waggle_push_gate for the push-kind events among `inserted` (one statement
// for the batch; none when no event is of a push kind). Returns the jobs added.
size_t gate_push_jobs(pqxx::work& tx, const std::vector<gated_event>& inserted);

// -- the matcher ------------------------------------------------------------------

struct match_settings {
  size_t max_jobs = 64;
  std::chrono::seconds claim_lease{30};
  std::chrono::seconds retry_after{2};
  std::chrono::seconds wake_ttl{3600};  // a wake expires at min(lease expiry, now + this)
  std::chrono::seconds delivery_lease{30};  // the claim of a wake handed to delivery
};

struct claimed_job {
  std::string event_id;  // 64 hex
  int attempts = 0;      // including this claim
  int64_t created_at = 0;
};
// Jobs are claimed at most this many times (written into the SQL, where the
// partial indexes of migrations/0009 need it as a constant).
inline constexpr int max_match_attempts = 8;

// Claims up to max_jobs due jobs of ONE community (the one with the oldest
// due job not locked by another claimer), FOR UPDATE SKIP LOCKED, under one
// fresh claim_id: state 'matching', attempts + 1, due again at the claim's
// lease end. In the caller's transaction.
struct job_claim {
  int64_t community_id = 0;
  std::string claim_id;
  std::vector<claimed_job> jobs;
};
job_claim claim_match_jobs(pqxx::transaction_base& tx, const match_settings& s);

// Fenced by (community, claim_id, state 'matching'): deletes the finished
// jobs and sends the failed ones back (pending, due after retry_after).
// Returns rows changed: a stale claim_id changes none.
size_t complete_match_jobs(pqxx::transaction_base& tx, int64_t community_id, const std::string& claim_id,
                           const std::vector<std::string>& done,
                           const std::vector<std::string>& retry, const match_settings& s);

// One wake request of a batch: the lease by address and the generation the
// matcher saw, and the event.
struct wake_enqueue {
  std::string author;  // 64 hex
  std::string installation_id;
  int64_t generation = 0;
  std::string event_id;  // 64 hex
};
enum class wake_outcome : uint8_t { enqueued, duplicate, inactive_lease };
const char* to_string(wake_outcome o);

// A wake written by a flush and handed straight to delivery (claimed).
struct ready_wake {
  int64_t id = 0;
  std::string request_id;
  std::string claim_id;
  std::string endpoint_grant;
  int64_t expires_at = 0;
  std::string event_id;
  int attempts = 1;
  int64_t created_at = 0;
};
struct flush_result {
  std::vector<wake_outcome> outcomes;  // aligned with the requests
  std::vector<ready_wake> ready;       // the enqueued ones, claimed for delivery
};
// ONE statement: the distinct leases locked FOR UPDATE in (author,
// installation) order and revalidated (generation, live, endpoint enabled,
// unexpired), one multi-row insert under the dedup key (community_id,
// endpoint_hash, event_id) copying endpoint and grant from the lease, the new
// rows claimed for delivery under `delivery_claim` (fresh uuid), and one
// outcome per request.
flush_result flush_wakes(pqxx::transaction_base& tx, int64_t community_id,
                         const std::vector<wake_enqueue>& requests, const match_settings& s,
                         int64_t now);

// What one matcher batch did (docs/push.md, "The matcher": one transaction).
struct match_batch {
  int64_t community_id = 0;
  std::string community_host;
  size_t jobs = 0;
  size_t matched = 0, unmatched = 0, gone = 0, retried = 0;  // jobs by result
  std::map<wake_outcome, size_t> wakes;
  std::vector<ready_wake> ready;
  double oldest_job_seconds = 0;
  size_t statements = 0;  // sent to the server, for the constant-cost test
  // What the pure match saw and decided (recorded in traces).
  std::vector<proto::push::match_event> events;
  std::vector<proto::push::match_lease> leases;
  std::vector<proto::push::readable_pair> readable;
  std::vector<proto::push::wake_request> decided;
};
// Claim, load (events, leases, readable pairs: one statement each), match in
// memory, flush, complete: ONE transaction. A flush that fails is rolled back
// to a savepoint and only the jobs that contributed wakes are sent back;
// jobs without wakes complete. `now` is unix seconds.
match_batch run_match_batch(pqxx::connection& conn, const match_settings& s, int64_t now);

// The separate sweep: deletes jobs with max_attempts or more; returns how many.
size_t reap_exhausted_matches(pqxx::connection& conn, const match_settings& s);

// -- the wake outbox ----------------------------------------------------------------

struct claimed_wake {
  ready_wake wake;
  int64_t community_id = 0;
  std::string community_host;
};
// Claims up to `n` due wakes (pending, or sending with a lapsed claim), FOR
// UPDATE SKIP LOCKED, revalidating each in the same statement: the lease at
// the wake's generation still live, endpoint enabled and unexpired, the
// wake unexpired, the event live and readable by the lease's author. Wakes
// that fail it are marked failed instead of claimed. `suppressed` counts them.
std::vector<claimed_wake> claim_wakes(pqxx::connection& conn, size_t n,
                                      std::chrono::seconds lease, int max_attempts,
                                      size_t* suppressed = nullptr);

enum class wake_completion : uint8_t { delivered, retry, failed, gone };
struct wake_complete {
  int64_t community_id = 0;
  int64_t id = 0;
  std::string claim_id;
  wake_completion how = wake_completion::delivered;
  std::chrono::milliseconds retry_after{0};
};
// Set-wise, fenced by (id, claim_id, state 'sending'), one transaction:
// delivered and failed are final; retry is due again after its delay, or
// failed at max_attempts; gone fails the wake and disables exactly the lease
// generation it was sent for. Returns, per input, whether the fence held.
std::vector<bool> complete_wakes(pqxx::connection& conn, const std::vector<wake_complete>& c,
                                 int max_attempts);

// Housekeeping: leases past expiry deactivated, final wakes past their expiry
// pruned. Returns rows changed.
size_t sweep_push(pqxx::connection& conn);

}  // namespace waggle::db
