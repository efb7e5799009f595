#include "db/operator_outbox.hpp"

#include <optional>
#include <set>
#include <stdexcept>
#include <string_view>

#include <pqxx/nontransaction>
#include <pqxx/prepared_statement>
#include <pqxx/result>

#include "db/sql_util.hpp"
#include "db/statistics.hpp"

// The statements of operator listeners (docs/delivery.md, "Outbox"). Keys are
// bytea in the schema and travel as hex text (arrays as one parameter each,
// db/sql_util.hpp); every value is a parameter of a prepared statement.

namespace waggle::db {

using namespace sql;

namespace {

// One row per (source, distinct target) in, one outbox row per registered
// listener of that target out, only for listeners that may read the event
// (migration 0008: a row the listener could never be sent would only take
// its turns at claim time, and anyone posting where it was banned could write
// them for free), at most $8 per event (the first targets as the event names
// them): one event cannot fan out into an unbounded number of deliveries. The events the rows name were inserted by this
// transaction (the caller's promise), so a conflict can only be the same
// (listener, target, community, event) twice, which DO NOTHING absorbs.
// pg_notify runs in the same statement and only when rows were added: CASE
// does not evaluate a volatile branch whose condition is false, so a batch
// whose mentions name no registered target takes no NOTIFY lock at commit.
constexpr const char* stmt_enqueue = "waggle_ol_enqueue";
constexpr const char* sql_enqueue = R"sql(
WITH src AS (
  SELECT DISTINCT u.community_id, decode(u.event_hex, 'hex') AS event_id, u.kind, u.created_at,
         decode(u.target_hex, 'hex') AS target, u.ord
    FROM unnest($1::bigint[], $2::text[], $3::int[], $4::bigint[], $5::text[], $7::int[])
         AS u(community_id, event_hex, kind, created_at, target_hex, ord)
), matched AS (
  SELECT s.community_id, r.listener_pubkey, s.target, s.event_id, s.kind, s.created_at,
         row_number() OVER (PARTITION BY s.community_id, s.event_id
                            ORDER BY s.ord, r.listener_pubkey) AS n
    FROM src s
    JOIN operator_listener_pubkeys r ON r.community_id = s.community_id
                                    AND r.target_pubkey = s.target
   WHERE waggle_listener_may_read(s.community_id, s.event_id, r.listener_pubkey,
                                  extract(epoch FROM now())::bigint)
), ins AS (
  INSERT INTO operator_listener_outbox (community_id, listener_pubkey, target_pubkey, event_id,
                                        event_kind, event_created_at)
  SELECT m.community_id, m.listener_pubkey, m.target, m.event_id, m.kind, m.created_at
    FROM matched m
   WHERE m.n <= $8
   ORDER BY m.community_id, m.listener_pubkey, m.target, m.event_id
  ON CONFLICT (community_id, listener_pubkey, target_pubkey, event_id) DO NOTHING
  RETURNING 1
), added AS (SELECT count(*) AS n FROM ins)
SELECT n, CASE WHEN n > 0 THEN pg_notify($6, '') END FROM added
)sql";

// Duplicates were removed by the caller: ON CONFLICT DO UPDATE may not touch
// one row twice in a statement. Sorted, so concurrent registrations of
// overlapping sets lock the keys in one order.
constexpr const char* stmt_register = "waggle_ol_register";
constexpr const char* sql_register = R"sql(
INSERT INTO operator_listener_pubkeys (community_id, target_pubkey, listener_pubkey)
SELECT $1, decode(t, 'hex'), decode($2, 'hex')
  FROM unnest($3::text[]) AS t
 ORDER BY t
ON CONFLICT (community_id, target_pubkey, listener_pubkey) DO UPDATE SET created_at = now()
)sql";

// The listener's other registrations in the community (the cap counts them
// with the new ones), under a transaction lock per (community, listener) so
// two nodes' registrations cannot both pass the cap.
constexpr const char* stmt_register_count = "waggle_ol_register_count";
constexpr const char* sql_register_count = R"sql(
SELECT pg_advisory_xact_lock(hashtextextended('operator_listener:' || $1::bigint || ':' || $2::text, 0)),
       (SELECT count(*) FROM operator_listener_pubkeys
         WHERE community_id = $1::bigint AND listener_pubkey = decode($2::text, 'hex')
           AND encode(target_pubkey, 'hex') <> ALL ($3::text[]))
)sql";

constexpr const char* stmt_list = "waggle_ol_list";
constexpr const char* sql_list = R"sql(
SELECT encode(target_pubkey, 'hex'), floor(extract(epoch FROM created_at))::bigint
  FROM operator_listener_pubkeys
 WHERE community_id = $1 AND listener_pubkey = decode($2, 'hex')
 ORDER BY target_pubkey
)sql";

constexpr const char* stmt_reap_registrations = "waggle_ol_reap_registrations";
constexpr const char* sql_reap_registrations = R"sql(
DELETE FROM operator_listener_pubkeys r USING communities co
 WHERE r.community_id = co.id AND r.created_at < now() - $1::bigint * interval '1 second'
)sql";

// The claim, in one statement: for each listener with room (requests it
// may still have out), its communities with due rows, those waiting longest
// first (migration 0016's skip scan, at most $2 of them); in each, lock up
// to `room` due rows, oldest due first (SKIP LOCKED: rows another supervisor
// is claiming right now are left to it, nobody waits). A listener's rows
// take its communities in turns (every community's oldest, then every
// community's second, ...), so a flood of mentions in one community never
// fills the listener's room while another community's wait (R14-1); keep at
// most `room` of each listener's, then take them round-robin across
// listeners (every listener's first, then every listener's second, ...) up
// to $2, so one listener's backlog never fills the free slots while
// another's rows wait; delete the ones whose event is no longer live or that
// the listener may no longer read, and claim the rest.
// Locked rows that are not kept stay locked until this transaction ends
// (milliseconds), and a concurrent claimer skips them meanwhile. A sending
// row is due again when its lease (next_attempt_at) ran out; its new claim_id
// fences the old claimant out. `gone` and `claimed` split `c` by one
// predicate, so no row is in both; `gone` runs although nothing reads it (a
// data-modifying WITH always runs to completion).
constexpr const char* stmt_claim = "waggle_ol_claim";
constexpr const char* sql_claim = R"sql(
WITH l AS (
  SELECT decode(u.x, 'hex') AS listener, u.room
    FROM unnest($1::text[], $6::int[]) AS u(x, room)
   WHERE u.room > 0
), c AS (
  SELECT r.community_id, r.id, r.event_id, r.listener_pubkey
    FROM (SELECT t.*,
                 row_number() OVER (PARTITION BY t.listener_pubkey
                                    ORDER BY t.community_turn, t.next_attempt_at, t.id) AS turn
            FROM (SELECT d.*, l.room,
                         row_number() OVER (PARTITION BY d.listener_pubkey, d.community_id
                                            ORDER BY d.next_attempt_at, d.id) AS community_turn
                    FROM l
                    CROSS JOIN LATERAL waggle_listener_due_communities(l.listener, $3, $4, $2) AS dc
                    CROSS JOIN LATERAL (
                         SELECT o.community_id, o.id, o.event_id, o.listener_pubkey, o.next_attempt_at
                           FROM operator_listener_outbox o
                          WHERE o.listener_pubkey = l.listener AND o.community_id = dc.community_id
                            AND o.next_attempt_at <= now() AND o.attempts < $3
                            AND o.created_at > now() - $4::bigint * interval '1 second'
                          ORDER BY o.next_attempt_at, o.id
                          LIMIT l.room
                            FOR UPDATE SKIP LOCKED) AS d) AS t) AS r
   WHERE r.turn <= r.room
   ORDER BY r.turn, r.next_attempt_at, r.id
   LIMIT $2
), live AS (
  -- Deliverable: the listener may still read the event now (migration 0008:
  -- the event live and unexpired, the community's and the channel's rules).
  SELECT c.community_id, c.id,
         waggle_listener_may_read(c.community_id, c.event_id, c.listener_pubkey,
                                  extract(epoch FROM now())::bigint) AS live
    FROM c
), gone AS (
  DELETE FROM operator_listener_outbox o USING live l
   WHERE o.community_id = l.community_id AND o.id = l.id AND NOT l.live
  RETURNING 1
), claimed AS (
  UPDATE operator_listener_outbox o
     SET state = 'sending', claim_id = gen_random_uuid(), attempts = o.attempts + 1,
         lease_until = now() + $5::bigint * interval '1 second',
         next_attempt_at = now() + $5::bigint * interval '1 second'
    FROM live l
   WHERE o.community_id = l.community_id AND o.id = l.id AND l.live
  RETURNING o.id, o.delivery_id, o.claim_id, o.listener_pubkey, o.target_pubkey, o.community_id,
            o.event_id, o.attempts, o.created_at
)
SELECT cl.id, cl.delivery_id::text, cl.claim_id::text, encode(cl.listener_pubkey, 'hex'),
       encode(cl.target_pubkey, 'hex'), cl.community_id, co.host, e.raw, cl.attempts,
       floor(extract(epoch FROM cl.created_at))::bigint
  FROM claimed cl
  JOIN events e ON e.community_id = cl.community_id AND e.id = cl.event_id
  JOIN communities co ON co.id = cl.community_id
 ORDER BY cl.id
)sql";

// Completions: every one fenced by (id, claim_id, state 'sending').
constexpr const char* stmt_delete = "waggle_ol_delete";
constexpr const char* sql_delete = R"sql(
DELETE FROM operator_listener_outbox
 WHERE community_id = $1 AND id = $2 AND claim_id = $3::uuid AND state = 'sending'
)sql";

constexpr const char* stmt_retry = "waggle_ol_retry";
constexpr const char* sql_retry = R"sql(
UPDATE operator_listener_outbox
   SET state = 'pending', claim_id = NULL, lease_until = NULL,
       next_attempt_at = now() + $4::bigint * interval '1 millisecond'
 WHERE community_id = $1 AND id = $2 AND claim_id = $3::uuid AND state = 'sending'
   AND attempts < $5 AND created_at > now() - $6::bigint * interval '1 second'
)sql";

constexpr const char* stmt_reap_outbox = "waggle_ol_reap_outbox";
constexpr const char* sql_reap_outbox = R"sql(
DELETE FROM operator_listener_outbox o USING communities co
 WHERE o.community_id = co.id AND o.created_at < now() - $1::bigint * interval '1 second'
)sql";

// A scan of the outbox, which the retention keeps to 15 minutes of mentions.
constexpr const char* stmt_state = "waggle_ol_state";
constexpr const char* sql_state = R"sql(
SELECT count(*), coalesce(extract(epoch FROM now() - min(created_at)), 0)::float8,
       extract(epoch FROM min(next_attempt_at)
                 FILTER (WHERE attempts < $2::int AND created_at > now() - $3::bigint * interval '1 second'
                           AND listener_pubkey IN (SELECT decode(x, 'hex') FROM unnest($4::text[]) AS x))
               - now())::float8
  FROM operator_listener_outbox
 WHERE listener_pubkey IN (SELECT decode(x, 'hex') FROM unnest($1::text[]) AS x)
)sql";

void prepare(pqxx::connection_base& conn) {
  // As db/event_write_sql.hpp: re-defining a name with the same text is a
  // no-op in libpqxx 6, registered with the server on first use.
  conn.prepare(stmt_enqueue, sql_enqueue);
  conn.prepare(stmt_register, sql_register);
  conn.prepare(stmt_register_count, sql_register_count);
  conn.prepare(stmt_list, sql_list);
  conn.prepare(stmt_reap_registrations, sql_reap_registrations);
  conn.prepare(stmt_claim, sql_claim);
  conn.prepare(stmt_delete, sql_delete);
  conn.prepare(stmt_retry, sql_retry);
  conn.prepare(stmt_reap_outbox, sql_reap_outbox);
  conn.prepare(stmt_state, sql_state);
}

int64_t seconds_of(std::chrono::seconds s) { return static_cast<int64_t>(s.count()); }

std::string hex_array(const std::vector<std::string>& keys) {
  array_literal a;
  for (const auto& k : keys)
    a.text(k);
  return a.str();
}

}  // namespace

const std::vector<std::string>& claim_session_setup() {
  static const std::vector<std::string> setup = [] {
    auto statements = writer_session_settings();
    statements.push_back("SELECT waggle_listener_may_read(0, ''::bytea, ''::bytea, 0)");
    statements.push_back("SELECT count(*) FROM waggle_listener_due_communities(''::bytea, 0, 0, 0)");
    return statements;
  }();
  return setup;
}

bool wakes_listeners(int32_t kind) {
  return kind == 9 || kind == 40002 || kind == 45001 || kind == 45003;
}

size_t enqueue_mentions(pqxx::work& tx, const std::vector<mention_source>& stored) {
  array_literal community, event, kind, created, target, ord;
  bool any = false;
  for (const auto& s : stored) {
    if (!s.ev || !wakes_listeners(s.ev->kind))
      continue;
    // Only the canonical spelling of a key names it: what a registration
    // stores (64 lowercase hex); anything else names no target. In tag
    // order, so the per-event cap keeps the first targets the author named.
    std::set<std::string_view> seen;
    int64_t position = 0;
    for (const auto& t : s.ev->tags) {
      if (t.size() < 2 || t[0] != "p" || !is_hex64(t[1]) || !seen.insert(t[1]).second)
        continue;
      community.integer(s.community_id);
      event.text(s.ev->id);
      kind.integer(s.ev->kind);
      created.integer(s.ev->created_at);
      target.text(t[1]);
      ord.integer(position++);
      any = true;
    }
  }
  // A batch without mentions pays nothing, not even the registrations look-up.
  if (!any)
    return 0;
  prepare(tx.conn());
  auto r = tx.exec_prepared(stmt_enqueue, community.str(), event.str(), kind.str(), created.str(),
                            target.str(), delivery_wake_channel, ord.str(),
                            static_cast<int64_t>(max_deliveries_per_event));
  return r[0][0].as<size_t>();
}

std::optional<size_t> register_listener_targets(pqxx::connection& conn, int64_t community_id,
                                                const std::string& listener,
                                                const std::vector<std::string>& targets,
                                                size_t max_registrations) {
  if (!is_hex64(listener))
    throw std::invalid_argument("register_listener_targets: listener is not 64 lowercase hex");
  std::set<std::string> distinct;
  for (const auto& t : targets) {
    if (!is_hex64(t))
      throw std::invalid_argument("register_listener_targets: target is not 64 lowercase hex");
    distinct.insert(t);
  }
  if (distinct.empty())
    return 0;
  array_literal a;
  for (const auto& t : distinct)
    a.text(t);
  prepare(conn);
  pqxx::work tx(conn);
  if (max_registrations > 0) {
    auto others = tx.exec_prepared(stmt_register_count, community_id, listener, a.str())[0][1]
                    .as<size_t>();
    if (others + distinct.size() > max_registrations)
      return std::nullopt;  // the transaction rolls back: nothing written
  }
  tx.exec_prepared(stmt_register, community_id, listener, a.str());
  tx.commit();
  return distinct.size();
}

std::vector<listener_registration> list_listener_targets(pqxx::connection& conn,
                                                         int64_t community_id,
                                                         const std::string& listener) {
  prepare(conn);
  pqxx::read_transaction tx(conn);
  std::vector<listener_registration> out;
  for (const auto& row : tx.exec_prepared(stmt_list, community_id, listener))
    out.push_back({row[0].as<std::string>(), row[1].as<int64_t>()});
  tx.commit();
  return out;
}

size_t reap_listener_registrations(pqxx::connection& conn, std::chrono::seconds max_age) {
  prepare(conn);
  pqxx::work tx(conn);
  auto r = tx.exec_prepared(stmt_reap_registrations, seconds_of(max_age));
  tx.commit();
  return static_cast<size_t>(r.affected_rows());
}

namespace {

// The claim's arguments; nullopt when there is nothing to claim for.
struct claim_args {
  std::string keys, rooms;
  int64_t n;
};
std::optional<claim_args> make_claim_args(const std::vector<listener_room>& rooms, size_t n) {
  array_literal keys, room;
  std::set<std::string_view> seen;
  for (const auto& r : rooms)
    if (r.room > 0 && seen.insert(r.listener).second) {
      keys.text(r.listener);
      room.integer(r.room);
    }
  if (seen.empty() || n == 0)
    return std::nullopt;
  return claim_args{keys.str(), room.str(), static_cast<int64_t>(n)};
}

std::vector<claimed_delivery> claimed_rows(const pqxx::result& r) {
  std::vector<claimed_delivery> out;
  out.reserve(r.size());
  for (const auto& row : r) {
    claimed_delivery d;
    d.id = row[0].as<int64_t>();
    d.delivery_id = row[1].as<std::string>();
    d.claim_id = row[2].as<std::string>();
    d.listener = row[3].as<std::string>();
    d.target = row[4].as<std::string>();
    d.community_id = row[5].as<int64_t>();
    d.community_host = row[6].as<std::string>();
    d.event_raw = row[7].as<std::string>();
    d.attempts = row[8].as<int>();
    d.created_at = row[9].as<int64_t>();
    out.push_back(std::move(d));
  }
  return out;
}

}  // namespace

std::vector<claimed_delivery> claim_deliveries(pqxx::work& tx, const std::vector<listener_room>& rooms,
                                               size_t n, const claim_settings& settings) {
  auto args = make_claim_args(rooms, n);
  if (!args)
    return {};
  prepare(tx.conn());
  return claimed_rows(tx.exec_prepared(stmt_claim, args->keys, args->n, settings.max_attempts,
                                       seconds_of(settings.retention), seconds_of(settings.lease),
                                       args->rooms));
}

std::vector<claimed_delivery> claim_deliveries(pqxx::connection& conn,
                                               const std::vector<listener_room>& rooms, size_t n,
                                               const claim_settings& settings) {
  auto args = make_claim_args(rooms, n);
  if (!args)
    return {};
  prepare(conn);
  conn.prepare_now(stmt_claim);  // named below by SQL's EXECUTE, which cannot prepare it
  // One round trip where a transaction object takes four (BEGIN, SET LOCAL,
  // the claim, COMMIT), on the path of every wake: a query string of several
  // statements runs as one implicit transaction, in which SET LOCAL holds to
  // its end, and the result is the last statement's. The claim need not
  // wait for its WAL flush: lost in a crash, its rows are as they were
  // before it, pending or under an older lease, and are claimed and sent
  // again under the same delivery id, which is at least once as before.
  // Completions stay synchronous: a lost one would send a delivered row
  // again.
  pqxx::nontransaction tx(conn);
  auto q = [&](const auto& v) { return tx.quote(v); };
  return claimed_rows(tx.exec("SET LOCAL synchronous_commit = off; EXECUTE " + std::string(stmt_claim) + "(" +
                              q(args->keys) + ", " + q(args->n) + ", " + q(settings.max_attempts) + ", " +
                              q(seconds_of(settings.retention)) + ", " + q(seconds_of(settings.lease)) +
                              ", " + q(args->rooms) + ")"));
}

namespace {
std::vector<listener_room> full_rooms(const std::vector<std::string>& listeners, size_t n) {
  std::vector<listener_room> rooms;
  for (const auto& l : listeners)
    rooms.push_back({l, static_cast<uint32_t>(n)});
  return rooms;
}
}  // namespace

std::vector<claimed_delivery> claim_deliveries(pqxx::work& tx,
                                               const std::vector<std::string>& listeners,
                                               size_t n, const claim_settings& settings) {
  return claim_deliveries(tx, full_rooms(listeners, n), n, settings);
}

std::vector<claimed_delivery> claim_deliveries(pqxx::connection& conn,
                                               const std::vector<std::string>& listeners,
                                               size_t n, const claim_settings& settings) {
  return claim_deliveries(conn, full_rooms(listeners, n), n, settings);
}

completion_result complete_delivery(pqxx::connection& conn, const claimed_delivery& row,
                                    completion how, std::chrono::milliseconds retry_after,
                                    const claim_settings& settings) {
  prepare(conn);
  pqxx::work tx(conn);
  completion_result result = completion_result::fenced;
  if (how == completion::retry) {
    auto r = tx.exec_prepared(stmt_retry, row.community_id, row.id, row.claim_id,
                              static_cast<int64_t>(retry_after.count()), settings.max_attempts,
                              seconds_of(settings.retention));
    if (r.affected_rows() > 0)
      result = completion_result::done;
  }
  if (result != completion_result::done) {
    // Delivered or refused for good, or a retry that may not happen (it
    // would never be claimed again): the row goes, if this claim still holds
    // it.
    auto r = tx.exec_prepared(stmt_delete, row.community_id, row.id, row.claim_id);
    if (r.affected_rows() > 0)
      result = how == completion::retry ? completion_result::dropped : completion_result::done;
  }
  tx.commit();
  return result;
}

size_t reap_outbox(pqxx::connection& conn, std::chrono::seconds retention) {
  prepare(conn);
  pqxx::work tx(conn);
  auto r = tx.exec_prepared(stmt_reap_outbox, seconds_of(retention));
  tx.commit();
  return static_cast<size_t>(r.affected_rows());
}

outbox_state read_outbox_state(pqxx::connection& conn, const std::vector<std::string>& listeners,
                               const claim_settings& settings,
                               const std::vector<std::string>* due_for) {
  outbox_state out;
  if (listeners.empty())
    return out;
  prepare(conn);
  pqxx::read_transaction tx(conn);
  auto r = tx.exec_prepared(stmt_state, hex_array(listeners), settings.max_attempts,
                            seconds_of(settings.retention), hex_array(due_for ? *due_for : listeners));
  tx.commit();
  out.rows = r[0][0].as<size_t>();
  out.oldest_age_seconds = r[0][1].as<double>();
  if (!r[0][2].is_null())
    out.next_due_in_seconds = r[0][2].as<double>();
  return out;
}

}  // namespace waggle::db
