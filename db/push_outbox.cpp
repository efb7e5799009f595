#include "db/push_store.hpp"

#include <pqxx/prepared_statement>
#include <pqxx/result>

#include "db/sql_util.hpp"

// The wake outbox (docs/push.md, "Delivery"): retry claims that revalidate
// in the claiming statement, set-wise fenced completions, and the sweep.
// First attempts never pass through claim_wakes: the matcher's flush writes
// them claimed and hands them to delivery directly.

namespace waggle::db {

using namespace sql;

namespace {

// Due: pending whose retry time came, or sending whose claim lapsed (a claim
// sets next_attempt_at to its lease's end). Each locked row is revalidated in
// the same statement, and only rows that pass are claimed; the others fail.
constexpr const char* stmt_claim = "waggle_pw_claim";
constexpr const char* sql_claim = R"sql(
WITH due AS (
  SELECT community_id, id FROM push_wake_outbox
   WHERE state IN ('pending', 'sending') AND next_attempt_at <= now()
   ORDER BY next_attempt_at
   LIMIT $1
     FOR UPDATE SKIP LOCKED
), chk AS (
  SELECT w.community_id, w.id,
         coalesce(w.attempts < $3 AND w.expires_at > $4 AND l.generation = w.lease_generation
                  AND l.active AND l.endpoint_enabled AND l.expires_at > $4
                  AND l.endpoint_hash = w.endpoint_hash
                  AND waggle_listener_may_read(w.community_id, w.event_id, w.author, $4),
                  false) AS ok
    FROM due d
    JOIN push_wake_outbox w ON w.community_id = d.community_id AND w.id = d.id
    LEFT JOIN push_leases l ON l.community_id = w.community_id AND l.author = w.author
                           AND l.installation_id = w.installation_id
), bad AS (
  UPDATE push_wake_outbox w SET state = 'failed', claim_id = NULL
    FROM chk WHERE w.community_id = chk.community_id AND w.id = chk.id AND NOT chk.ok
  RETURNING 1
), cl AS (
  UPDATE push_wake_outbox w
     SET state = 'sending', claim_id = gen_random_uuid(), attempts = w.attempts + 1,
         next_attempt_at = now() + $2::bigint * interval '1 second'
    FROM chk WHERE w.community_id = chk.community_id AND w.id = chk.id AND chk.ok
  RETURNING w.community_id, w.id, w.request_id, w.claim_id, w.endpoint_grant, w.expires_at,
            w.event_id, w.attempts, w.created_at
)
SELECT 'w', cl.community_id, cl.id, cl.request_id::text, cl.claim_id::text, cl.endpoint_grant,
       cl.expires_at, encode(cl.event_id, 'hex'), cl.attempts,
       floor(extract(epoch FROM cl.created_at))::bigint, co.host
  FROM cl JOIN communities co ON co.id = cl.community_id
UNION ALL
SELECT 'n', count(*), NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL FROM bad
)sql";

// One statement for any mix of completions. `gone` (a 410) also disables
// the endpoint of exactly the lease generation the wake was sent for.
constexpr const char* stmt_complete = "waggle_pw_complete";
constexpr const char* sql_complete = R"sql(
WITH u AS (
  SELECT * FROM unnest($1::bigint[], $2::bigint[], $3::text[], $4::text[], $5::bigint[])
         WITH ORDINALITY AS u(community_id, id, claim_id, how, retry_ms, ord)
), upd AS (
  UPDATE push_wake_outbox w
     SET state = CASE WHEN u.how = 'delivered' THEN 'delivered'
                      WHEN u.how = 'retry' AND w.attempts < $6 THEN 'pending'
                      ELSE 'failed' END,
         claim_id = NULL,
         next_attempt_at = CASE WHEN u.how = 'retry'
                                THEN now() + u.retry_ms * interval '1 millisecond'
                                ELSE w.next_attempt_at END
    FROM u
   WHERE w.community_id = u.community_id AND w.id = u.id AND w.claim_id = u.claim_id::uuid
     AND w.state = 'sending'
  RETURNING u.ord, u.how, w.community_id, w.author, w.installation_id, w.lease_generation
), gone AS (
  UPDATE push_leases l SET endpoint_enabled = false, updated_at = now()
    FROM upd
   WHERE upd.how = 'gone' AND l.community_id = upd.community_id AND l.author = upd.author
     AND l.installation_id = upd.installation_id AND l.generation = upd.lease_generation
  RETURNING 1
)
SELECT ord FROM upd
)sql";

// Leases past their expiry end; final wakes past theirs go (their dedup key
// is no longer needed: a wake that old is not sent again).
constexpr const char* sql_sweep = R"sql(
WITH leases AS (
  UPDATE push_leases SET active = false, updated_at = now()
   WHERE active AND expires_at <= extract(epoch FROM now())
  RETURNING 1
), wakes AS (
  DELETE FROM push_wake_outbox
   WHERE created_at < now() - interval '10 minutes'
     AND expires_at <= extract(epoch FROM now()) AND state IN ('delivered', 'failed')
  RETURNING 1
)
SELECT (SELECT count(*) FROM leases) + (SELECT count(*) FROM wakes)
)sql";

const char* how_text(wake_completion h) {
  switch (h) {
    case wake_completion::delivered: return "delivered";
    case wake_completion::retry: return "retry";
    case wake_completion::failed: return "failed";
    case wake_completion::gone: return "gone";
  }
  return "failed";
}

int64_t unix_now() {
  return std::chrono::duration_cast<std::chrono::seconds>(
           std::chrono::system_clock::now().time_since_epoch())
    .count();
}

}  // namespace

std::vector<claimed_wake> claim_wakes(pqxx::connection& conn, size_t n, std::chrono::seconds lease,
                                      int max_attempts, size_t* suppressed) {
  std::vector<claimed_wake> out;
  if (n == 0)
    return out;
  conn.prepare(stmt_claim, sql_claim);
  pqxx::work tx(conn);
  auto rows = tx.exec_prepared(stmt_claim, static_cast<int64_t>(n),
                               static_cast<int64_t>(lease.count()), max_attempts, unix_now());
  tx.commit();
  for (const auto& row : rows) {
    if (row[0].as<std::string>() == "n") {
      if (suppressed)
        *suppressed = row[1].as<size_t>();
      continue;
    }
    claimed_wake c;
    c.community_id = row[1].as<int64_t>();
    c.wake.id = row[2].as<int64_t>();
    c.wake.request_id = row[3].as<std::string>();
    c.wake.claim_id = row[4].as<std::string>();
    c.wake.endpoint_grant = row[5].as<std::string>();
    c.wake.expires_at = row[6].as<int64_t>();
    c.wake.event_id = row[7].as<std::string>();
    c.wake.attempts = row[8].as<int>();
    c.wake.created_at = row[9].as<int64_t>();
    c.community_host = row[10].as<std::string>();
    out.push_back(std::move(c));
  }
  return out;
}

std::vector<bool> complete_wakes(pqxx::connection& conn, const std::vector<wake_complete>& c,
                                 int max_attempts) {
  std::vector<bool> held(c.size(), false);
  if (c.empty())
    return held;
  array_literal community, id, claim, how, retry;
  for (const auto& x : c) {
    community.integer(x.community_id);
    id.integer(x.id);
    claim.text(x.claim_id);
    how.text(how_text(x.how));
    retry.integer(x.retry_after.count());
  }
  conn.prepare(stmt_complete, sql_complete);
  pqxx::work tx(conn);
  auto rows = tx.exec_prepared(stmt_complete, community.str(), id.str(), claim.str(), how.str(),
                               retry.str(), max_attempts);
  tx.commit();
  for (const auto& row : rows)
    held[row[0].as<size_t>() - 1] = true;
  return held;
}

size_t sweep_push(pqxx::connection& conn) {
  pqxx::work tx(conn);
  auto n = tx.exec1(sql_sweep)[0].as<size_t>();
  tx.commit();
  return n;
}

}  // namespace waggle::db
