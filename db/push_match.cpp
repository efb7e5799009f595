#include "db/push_store.hpp"

#include <algorithm>
#include <chrono>
#include <set>

#include <pqxx/except>
#include <pqxx/prepared_statement>
#include <pqxx/result>
#include <pqxx/subtransaction>

#include "db/sql_util.hpp"

// The matcher's batch (docs/push.md, "The matcher"): one transaction of at
// most eight statements whatever the batch's size: claim, events, leases,
// readable pairs, then SAVEPOINT, flush, RELEASE, complete.

namespace waggle::db {

using namespace sql;
namespace push = proto::push;

namespace {

// `attempts < 8` is written out (not a parameter) so the planner can use the
// partial due indexes of migrations/0009.
constexpr const char* stmt_claim = "waggle_pm_claim";
constexpr const char* sql_claim = R"sql(
WITH pick AS (
  SELECT community_id FROM push_match_queue
   WHERE attempts < 8 AND next_attempt_at <= now()
   ORDER BY next_attempt_at
   LIMIT 1
     FOR UPDATE SKIP LOCKED
), due AS (
  SELECT q.community_id, q.event_id FROM push_match_queue q JOIN pick p USING (community_id)
   WHERE q.attempts < 8 AND q.next_attempt_at <= now()
   ORDER BY q.next_attempt_at
   LIMIT $1
     FOR UPDATE OF q SKIP LOCKED
), cid AS (SELECT gen_random_uuid() AS id)
UPDATE push_match_queue q
   SET state = 'matching', claim_id = (SELECT id FROM cid), attempts = q.attempts + 1,
       next_attempt_at = now() + $2::bigint * interval '1 second'
  FROM due
 WHERE q.community_id = due.community_id AND q.event_id = due.event_id
RETURNING q.community_id, q.claim_id::text, encode(q.event_id, 'hex'), q.attempts,
          floor(extract(epoch FROM q.created_at))::bigint
)sql";

constexpr const char* stmt_complete = "waggle_pm_complete";
constexpr const char* sql_complete = R"sql(
WITH done AS (
  DELETE FROM push_match_queue
   WHERE community_id = $1 AND claim_id = $2::uuid AND state = 'matching'
     AND event_id IN (SELECT decode(x, 'hex') FROM unnest($3::text[]) AS x)
  RETURNING 1
), back AS (
  UPDATE push_match_queue SET state = 'pending', claim_id = NULL,
         next_attempt_at = now() + $5::bigint * interval '1 second'
   WHERE community_id = $1 AND claim_id = $2::uuid AND state = 'matching'
     AND event_id IN (SELECT decode(x, 'hex') FROM unnest($4::text[]) AS x)
  RETURNING 1
)
SELECT (SELECT count(*) FROM done) + (SELECT count(*) FROM back)
)sql";

// The live events of the batch (deleted or expired ones are simply absent:
// their jobs complete without a wake) and the community's host.
constexpr const char* stmt_events = "waggle_pm_events";
constexpr const char* sql_events = R"sql(
SELECT encode(e.id, 'hex'), encode(e.pubkey, 'hex'), e.kind, e.channel,
       (SELECT host FROM communities WHERE id = $1)
  FROM events e
 WHERE e.community_id = $1 AND e.id IN (SELECT decode(x, 'hex') FROM unnest($2::text[]) AS x)
   AND e.deleted_at IS NULL AND (e.expires_at IS NULL OR e.expires_at > $3)
 ORDER BY e.id
)sql";

constexpr const char* stmt_leases = "waggle_pm_leases";
constexpr const char* sql_leases = R"sql(
SELECT encode(author, 'hex'), installation_id, generation, array_to_string(channels, ','),
       array_to_string(kinds, ','), array_to_string(mutes, ',')
  FROM push_leases
 WHERE community_id = $1 AND active AND endpoint_enabled AND expires_at > $2
 ORDER BY author, installation_id
)sql";

// Which candidate (event, lease author) pairs may read: the operator
// listeners' rule (migrations/0008), one function for both pipelines.
constexpr const char* stmt_readable = "waggle_pm_readable";
constexpr const char* sql_readable = R"sql(
SELECT u.ord - 1, u.author
  FROM unnest($2::text[], $3::text[]) WITH ORDINALITY AS u(event_hex, author, ord)
 WHERE waggle_listener_may_read($1, decode(u.event_hex, 'hex'), decode(u.author, 'hex'), $4)
)sql";

// The flush: one statement (see flush_wakes in push_store.hpp).
constexpr const char* stmt_flush = "waggle_pm_flush";
constexpr const char* sql_flush = R"sql(
WITH req AS (
  SELECT decode(u.author, 'hex') AS author, u.installation, u.generation,
         decode(u.event_hex, 'hex') AS event_id, u.ord
    FROM unnest($2::text[], $3::text[], $4::bigint[], $5::text[])
         WITH ORDINALITY AS u(author, installation, generation, event_hex, ord)
), locked AS (
  SELECT l.author, l.installation_id, l.generation, l.endpoint_hash, l.endpoint_grant,
         l.expires_at, (l.active AND l.endpoint_enabled AND l.expires_at > $6) AS live
    FROM push_leases l
   WHERE l.community_id = $1
     AND (l.author, l.installation_id) IN (SELECT author, installation FROM req)
   ORDER BY l.author, l.installation_id
     FOR UPDATE
), valid AS (
  SELECT r.ord, r.event_id, k.author, k.installation_id, k.generation, k.endpoint_hash,
         k.endpoint_grant, k.expires_at
    FROM req r JOIN locked k ON k.author = r.author AND k.installation_id = r.installation
                            AND k.generation = r.generation AND k.live
), first AS (
  SELECT DISTINCT ON (endpoint_hash, event_id) * FROM valid ORDER BY endpoint_hash, event_id, ord
), cid AS (SELECT gen_random_uuid() AS id), ins AS (
  INSERT INTO push_wake_outbox (community_id, author, installation_id, lease_generation,
                                endpoint_hash, endpoint_grant, event_id, expires_at, state,
                                attempts, claim_id, next_attempt_at)
  SELECT $1, f.author, f.installation_id, f.generation, f.endpoint_hash, f.endpoint_grant,
         f.event_id, least(f.expires_at, $6 + $7), 'sending', 1, (SELECT id FROM cid),
         now() + $8::bigint * interval '1 second'
    FROM first f
   ORDER BY f.endpoint_hash, f.event_id
  ON CONFLICT (community_id, endpoint_hash, event_id) DO NOTHING
  RETURNING id, request_id, claim_id, endpoint_hash, event_id, endpoint_grant, expires_at,
            created_at
)
SELECT r.ord, CASE WHEN v.ord IS NULL THEN 'inactive_lease'
                   WHEN i.id IS NOT NULL THEN 'enqueued' ELSE 'duplicate' END,
       i.id, i.request_id::text, i.claim_id::text, i.endpoint_grant, i.expires_at,
       encode(i.event_id, 'hex'), floor(extract(epoch FROM i.created_at))::bigint
  FROM req r
  LEFT JOIN valid v ON v.ord = r.ord
  LEFT JOIN first f ON f.endpoint_hash = v.endpoint_hash AND f.event_id = v.event_id
  LEFT JOIN ins i ON f.ord = r.ord AND i.endpoint_hash = f.endpoint_hash
                 AND i.event_id = f.event_id
 ORDER BY r.ord
)sql";

constexpr const char* sql_reap = "DELETE FROM push_match_queue WHERE attempts >= 8";

void prepare(pqxx::connection_base& conn) {
  conn.prepare(stmt_claim, sql_claim);
  conn.prepare(stmt_complete, sql_complete);
  conn.prepare(stmt_events, sql_events);
  conn.prepare(stmt_leases, sql_leases);
  conn.prepare(stmt_readable, sql_readable);
  conn.prepare(stmt_flush, sql_flush);
}

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  size_t at = 0;
  while (at < s.size()) {
    auto comma = s.find(',', at);
    if (comma == std::string::npos)
      comma = s.size();
    out.push_back(s.substr(at, comma - at));
    at = comma + 1;
  }
  return out;
}

wake_outcome outcome_of(const std::string& s) {
  if (s == "enqueued")
    return wake_outcome::enqueued;
  if (s == "duplicate")
    return wake_outcome::duplicate;
  return wake_outcome::inactive_lease;
}

}  // namespace

const char* to_string(wake_outcome o) {
  switch (o) {
    case wake_outcome::enqueued: return "enqueued";
    case wake_outcome::duplicate: return "duplicate";
    case wake_outcome::inactive_lease: return "inactive_lease";
  }
  return "?";
}

job_claim claim_match_jobs(pqxx::transaction_base& tx, const match_settings& s) {
  prepare(tx.conn());
  job_claim out;
  for (const auto& row : tx.exec_prepared(stmt_claim, static_cast<int64_t>(s.max_jobs),
                                          static_cast<int64_t>(s.claim_lease.count()))) {
    out.community_id = row[0].as<int64_t>();
    out.claim_id = row[1].as<std::string>();
    out.jobs.push_back({row[2].as<std::string>(), row[3].as<int>(), row[4].as<int64_t>()});
  }
  std::sort(out.jobs.begin(), out.jobs.end(),
            [](const claimed_job& a, const claimed_job& b) { return a.event_id < b.event_id; });
  return out;
}

size_t complete_match_jobs(pqxx::transaction_base& tx, int64_t community_id, const std::string& claim_id,
                           const std::vector<std::string>& done,
                           const std::vector<std::string>& retry, const match_settings& s) {
  prepare(tx.conn());
  array_literal d, r;
  for (const auto& x : done)
    d.text(x);
  for (const auto& x : retry)
    r.text(x);
  return tx
    .exec_prepared1(stmt_complete, community_id, claim_id, d.str(), r.str(),
                    static_cast<int64_t>(s.retry_after.count()))[0]
    .as<size_t>();
}

flush_result flush_wakes(pqxx::transaction_base& tx, int64_t community_id,
                         const std::vector<wake_enqueue>& requests, const match_settings& s,
                         int64_t now) {
  prepare(tx.conn());
  flush_result out;
  if (requests.empty())
    return out;
  array_literal author, installation, generation, event;
  for (const auto& r : requests) {
    author.text(r.author);
    installation.text(r.installation_id);
    generation.integer(r.generation);
    event.text(r.event_id);
  }
  auto rows = tx.exec_prepared(stmt_flush, community_id, author.str(), installation.str(),
                               generation.str(), event.str(), static_cast<int64_t>(now),
                               static_cast<int64_t>(s.wake_ttl.count()),
                               static_cast<int64_t>(s.delivery_lease.count()));
  out.outcomes.assign(requests.size(), wake_outcome::inactive_lease);
  for (const auto& row : rows) {
    auto k = row[0].as<size_t>() - 1;
    out.outcomes[k] = outcome_of(row[1].as<std::string>());
    if (out.outcomes[k] != wake_outcome::enqueued)
      continue;
    ready_wake w;
    w.id = row[2].as<int64_t>();
    w.request_id = row[3].as<std::string>();
    w.claim_id = row[4].as<std::string>();
    w.endpoint_grant = row[5].as<std::string>();
    w.expires_at = row[6].as<int64_t>();
    w.event_id = row[7].as<std::string>();
    w.attempts = 1;
    w.created_at = row[8].as<int64_t>();
    out.ready.push_back(std::move(w));
  }
  return out;
}

match_batch run_match_batch(pqxx::connection& conn, const match_settings& s, int64_t now) {
  match_batch b;
  pqxx::work tx(conn);
  auto claim = claim_match_jobs(tx, s);
  b.statements = 1;
  b.jobs = claim.jobs.size();
  if (claim.jobs.empty()) {
    tx.commit();
    return b;
  }
  b.community_id = claim.community_id;
  int64_t oldest = now;
  for (const auto& j : claim.jobs)
    oldest = std::min(oldest, j.created_at);
  b.oldest_job_seconds = static_cast<double>(now - oldest);

  // Events and leases, one statement each.
  array_literal ids;
  for (const auto& j : claim.jobs)
    ids.text(j.event_id);
  for (const auto& row : tx.exec_prepared(stmt_events, b.community_id, ids.str(), now)) {
    push::match_event e;
    e.id = row[0].as<std::string>();
    e.author = row[1].as<std::string>();
    e.kind = row[2].as<int32_t>();
    if (!row[3].is_null())
      e.channel = row[3].as<std::string>();
    b.community_host = row[4].as<std::string>();
    b.events.push_back(std::move(e));
  }
  for (const auto& row : tx.exec_prepared(stmt_leases, b.community_id, now)) {
    push::match_lease l;
    l.author = row[0].as<std::string>();
    l.installation_id = row[1].as<std::string>();
    l.generation = row[2].as<int64_t>();
    l.channels = split(row[3].as<std::string>());
    for (const auto& k : split(row[4].as<std::string>()))
      l.kinds.push_back(std::stoi(k));
    l.mutes = split(row[5].as<std::string>());
    b.leases.push_back(std::move(l));
  }
  b.statements += 2;

  // Readable pairs, only for the candidates the pure rules leave (one
  // statement; none when nothing is a candidate).
  auto candidates = push::match_wakes(b.events, b.leases, nullptr);
  if (!candidates.empty()) {
    std::set<std::pair<size_t, std::string>> asked;
    for (const auto& c : candidates)
      asked.emplace(c.event, b.leases[c.lease].author);
    // The statement answers by position in the arrays sent.
    std::vector<std::pair<size_t, std::string>> order(asked.begin(), asked.end());
    array_literal ev, author;
    for (const auto& [e, a] : order) {
      ev.text(b.events[e].id);
      author.text(a);
    }
    for (const auto& row : tx.exec_prepared(stmt_readable, b.community_id, ev.str(), author.str(), now))
      b.readable.push_back({order[row[0].as<size_t>()].first, row[1].as<std::string>()});
    std::sort(b.readable.begin(), b.readable.end());
    ++b.statements;
  }
  b.decided = push::match_wakes(b.events, b.leases, &b.readable);

  // Which jobs contributed which wakes: a failed flush sends back only those.
  std::set<std::string> contributing;
  std::vector<wake_enqueue> requests;
  for (const auto& w : b.decided) {
    const auto& l = b.leases[w.lease];
    requests.push_back({l.author, l.installation_id, l.generation, b.events[w.event].id});
    contributing.insert(b.events[w.event].id);
  }
  std::set<std::string> live;
  for (const auto& e : b.events)
    live.insert(e.id);

  bool flushed = true;
  if (!requests.empty()) {
    try {
      pqxx::subtransaction sp(tx, "push_flush");
      auto f = flush_wakes(sp, b.community_id, requests, s, now);
      sp.commit();
      for (auto o : f.outcomes)
        ++b.wakes[o];
      b.ready = std::move(f.ready);
    } catch (const pqxx::broken_connection&) {
      throw;
    } catch (const pqxx::sql_error&) {
      flushed = false;
    }
    b.statements += 3;  // SAVEPOINT, the flush, RELEASE (or ROLLBACK TO)
  }

  std::vector<std::string> done, retry;
  for (const auto& j : claim.jobs) {
    if (!live.count(j.event_id)) {
      ++b.gone;
      done.push_back(j.event_id);
    } else if (!contributing.count(j.event_id)) {
      ++b.unmatched;
      done.push_back(j.event_id);
    } else if (flushed) {
      ++b.matched;
      done.push_back(j.event_id);
    } else {
      ++b.retried;
      retry.push_back(j.event_id);
    }
  }
  complete_match_jobs(tx, b.community_id, claim.claim_id, done, retry, s);
  ++b.statements;
  tx.commit();
  if (!flushed)
    b.ready.clear();
  return b;
}

size_t reap_exhausted_matches(pqxx::connection& conn, const match_settings&) {
  pqxx::work tx(conn);
  auto n = tx.exec0(sql_reap).affected_rows();
  tx.commit();
  return n;
}

}  // namespace waggle::db
