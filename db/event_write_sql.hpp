#pragma once

// The statements of the event write path (db/event_write.cpp explains the
// batch they form: S0 lock .. S5 ttl). Included by event_write.cpp only.

#include <string>

#include <pqxx/connection_base>

namespace waggle::db::write_sql {

// The kind predicate of the events_live_coordinate index, repeated verbatim so
// that the planner can prove the partial index applies.
//
// Two more planner notes for the statements below:
// - convert_from(bytea, 'UTF8') takes the "C" collation of its `name`
//   argument; COLLATE "default" restores the columns' collation, without which
//   a comparison with an indexed text column cannot be an index condition.
// - Per-candidate look-ups of events (the duplicate probe, the heads) are
//   LATERAL subqueries with OFFSET 0 (which keeps them from being flattened
//   into a join), so they stay parameterised index probes whatever the
//   statistics say. As a join, the duplicate probe's generic plan, made on a
//   fresh database where events looks like ten pages, was a hash join over a
//   sequential scan of events: every batch read the whole table, and a new
//   deployment ran at two thirds of its speed until autovacuum's first
//   ANALYZE (docs/write-path.md, "Plans on a fresh database").
#define WAGGLE_COORD_KINDS(col) \
  "(" col " IN (0, 3) OR " col " BETWEEN 10000 AND 19999 OR " col " BETWEEN 30000 AND 39999)"

// events.search (migrations/0011_search.sql, docs/search.md) from the text
// the relay prepared (db/event_search.hpp): NULL stays NULL, and text with
// no word (a reaction's "+") stores NULL too, so it stays out of the index.
#define WAGGLE_SEARCH_VECTOR(col) \
  "nullif(to_tsvector('simple', " col "), ''::tsvector)"

inline constexpr const char* stmt_lock = "waggle_ev_lock";
inline constexpr const char* sql_lock = R"sql(
SELECT count(pg_advisory_xact_lock(k.h))
  FROM (SELECT DISTINCT hashtextextended(convert_from(decode(x, 'hex'), 'UTF8'), 0) AS h
          FROM unnest($1::text[]) AS x
         ORDER BY 1) AS k
)sql";

// S1, in two pieces that the one-statement write (sql_check_insert below)
// shares: the candidates CTE `c` and the check's rows over it.
inline constexpr const char* sql_check_candidates = R"sql(
c AS (
  SELECT u.ord, u.community_id, u.id_hex, decode(u.id_hex, 'hex') AS id,
         decode(u.pubkey_hex, 'hex') AS pubkey, u.kind, u.created_at,
         convert_from(decode(u.d_hex, 'hex'), 'UTF8') COLLATE "default" AS d,
         convert_from(decode(u.a_hex, 'hex'), 'UTF8') COLLATE "default" AS a_value,
         u.channel
    FROM unnest($1::bigint[], $2::text[], $3::text[], $4::int[], $5::bigint[], $6::text[],
                $7::text[], $8::text[])
         WITH ORDINALITY AS u(community_id, id_hex, pubkey_hex, kind, created_at, d_hex, a_hex,
                              channel, ord)
)
)sql";
inline constexpr const char* sql_check_rows = R"sql(
SELECT c.ord, 'x' AS what, NULL::text AS head_id, NULL::bigint AS head_created_at,
       NULL::text AS role
  FROM c CROSS JOIN LATERAL (SELECT 1 FROM events e
                              WHERE e.community_id = c.community_id AND e.id = c.id
                             OFFSET 0) AS dup
UNION ALL
SELECT c.ord, 'h', encode(h.id, 'hex'), h.created_at, NULL
  FROM c CROSS JOIN LATERAL (
         SELECT e.id, e.created_at FROM events e
          WHERE e.community_id = c.community_id AND e.kind = c.kind AND e.pubkey = c.pubkey
            AND coalesce(e.d_tag, '') = c.d AND e.deleted_at IS NULL
            AND )sql" WAGGLE_COORD_KINDS("e.kind") R"sql(
         OFFSET 0) AS h
 WHERE c.d IS NOT NULL
UNION ALL
SELECT c.ord, 't', NULL, NULL, NULL
  FROM c
 WHERE EXISTS (SELECT 1 FROM event_tags t
                WHERE t.community_id = c.community_id AND t.name = 'e' AND t.value = c.id_hex
                  AND t.kind = 5 AND t.pubkey = c.pubkey)
    OR (c.a_value IS NOT NULL
        AND EXISTS (SELECT 1 FROM event_tags t
                     WHERE t.community_id = c.community_id AND t.name = 'a'
                       AND t.value = c.a_value AND t.created_at >= c.created_at
                       AND t.kind = 5 AND t.pubkey = c.pubkey))
UNION ALL
SELECT c.ord, 'c',
       ch.visibility || CASE WHEN ch.deleted_at IS NOT NULL THEN ':deleted'
                             WHEN ch.archived_at IS NOT NULL THEN ':archived' ELSE '' END,
       NULL, m.role
  FROM c JOIN channels ch ON ch.community_id = c.community_id AND ch.id = c.channel
  LEFT JOIN channel_members m ON m.community_id = c.community_id AND m.channel_id = c.channel
                             AND m.pubkey = c.pubkey AND m.removed_at IS NULL
 WHERE c.channel IS NOT NULL
UNION ALL
SELECT c.ord, 'p', v.verdict, NULL, NULL
  FROM c JOIN communities co ON co.id = c.community_id
  CROSS JOIN LATERAL (SELECT CASE
    WHEN c.pubkey = decode($9, 'hex') THEN NULL
    WHEN EXISTS (SELECT 1 FROM community_banned_pubkeys b
                  WHERE b.community_id = c.community_id AND b.pubkey = c.pubkey) THEN 'banned'
    WHEN EXISTS (SELECT 1 FROM community_banned_events b
                  WHERE b.community_id = c.community_id AND b.event_id = c.id) THEN 'event'
    WHEN EXISTS (SELECT 1 FROM community_kinds k
                  WHERE k.community_id = c.community_id AND k.kind = c.kind AND NOT k.allowed)
      OR (EXISTS (SELECT 1 FROM community_kinds k
                   WHERE k.community_id = c.community_id AND k.allowed)
          AND NOT EXISTS (SELECT 1 FROM community_kinds k
                           WHERE k.community_id = c.community_id AND k.kind = c.kind
                             AND k.allowed)) THEN 'kind'
    WHEN co.policy <> 'open'
     AND NOT EXISTS (SELECT 1 FROM community_members m
                      WHERE m.community_id = c.community_id AND m.pubkey = c.pubkey
                        AND m.removed_at IS NULL) THEN 'member'
    END AS verdict) AS v
 WHERE v.verdict IS NOT NULL
)sql";

inline constexpr const char* stmt_check = "waggle_ev_check";
inline const std::string sql_check = std::string("WITH ") + sql_check_candidates + sql_check_rows;

// The one-statement write (write_batch's fast path, db/event_write.cpp): S1
// and S3 in ONE statement, for batches whose every candidate is "plain" (no
// coordinate, no deletion, no channel, nothing for S4..S7 to do), so that
// S1's only rows are 'x', 't' and 'p', and decide() inserts exactly the
// candidates that have no row. The insert takes those; ON CONFLICT still
// absorbs a concurrent insert of the same id, as S3 does. Sent outside an
// explicit transaction, the statement is its own transaction: one round trip
// where BEGIN, S1, S3 and COMMIT took four. The check's rows and the inserted
// ids come back together ('i': head_id is the id, head_created_at the
// community). $1..$9 as S1; per candidate (same order) $10 raw, $11
// expires_at and $18 search text (db/event_search.hpp; NULL: nothing to
// search); the tag rows $12..$17 (community, event id, name, value, kind,
// created_at) as S3's $8..$13.
inline constexpr const char* stmt_check_insert = "waggle_ev_check_insert";
inline const std::string sql_check_insert = std::string("WITH ") + sql_check_candidates +
                                            ", chk AS (" + sql_check_rows + R"sql(), ins AS (
  INSERT INTO events (community_id, id, pubkey, created_at, kind, d_tag, raw, channel,
                      expires_at, search)
  SELECT c.community_id, c.id, c.pubkey, c.created_at, c.kind, NULL, r.raw, NULL, r.expires_at,
         )sql" WAGGLE_SEARCH_VECTOR("r.search") R"sql(
    FROM c JOIN unnest($10::text[], $11::bigint[], $18::text[])
                WITH ORDINALITY AS r(raw, expires_at, search, ord)
           ON r.ord = c.ord
   WHERE NOT EXISTS (SELECT 1 FROM chk WHERE chk.ord = c.ord)
   ORDER BY c.ord
  ON CONFLICT (community_id, id) DO NOTHING
  RETURNING community_id, id, pubkey
), tags AS (
  INSERT INTO event_tags (community_id, event_id, name, value, kind, created_at, pubkey)
  SELECT t.community_id, ins.id, t.name, convert_from(decode(t.value_hex, 'hex'), 'UTF8'),
         t.kind, t.created_at, ins.pubkey
    FROM unnest($12::bigint[], $13::text[], $14::text[], $15::text[], $16::int[], $17::bigint[])
         AS t(community_id, event_id_hex, name, value_hex, kind, created_at)
    JOIN ins ON ins.community_id = t.community_id AND ins.id = decode(t.event_id_hex, 'hex')
  RETURNING 1
)
SELECT ord, what, head_id, head_created_at, role FROM chk
UNION ALL
SELECT NULL, 'i', encode(id, 'hex'), community_id, NULL FROM ins
)sql";

inline constexpr const char* stmt_replace = "waggle_ev_replace";
inline constexpr const char* sql_replace = R"sql(
UPDATE events e SET deleted_at = now()
  FROM unnest($1::bigint[], $2::text[]) AS u(community_id, id_hex)
 WHERE e.community_id = u.community_id AND e.id = decode(u.id_hex, 'hex')
   AND e.deleted_at IS NULL
)sql";

inline constexpr const char* stmt_insert = "waggle_ev_insert";
inline constexpr const char* sql_insert = R"sql(
WITH ins AS (
  INSERT INTO events (community_id, id, pubkey, created_at, kind, d_tag, raw, channel,
                      expires_at, search)
  SELECT u.community_id, decode(u.id_hex, 'hex'), decode(u.pubkey_hex, 'hex'), u.created_at,
         u.kind, convert_from(decode(u.d_hex, 'hex'), 'UTF8'), u.raw, u.channel, u.expires_at,
         )sql" WAGGLE_SEARCH_VECTOR("u.search") R"sql(
    FROM unnest($1::bigint[], $2::text[], $3::text[], $4::bigint[], $5::int[], $6::text[],
                $7::text[], $14::text[], $15::bigint[], $16::text[])
         WITH ORDINALITY AS u(community_id, id_hex, pubkey_hex, created_at, kind, d_hex, raw,
                              channel, expires_at, search, ord)
   ORDER BY u.ord
  ON CONFLICT (community_id, id) DO NOTHING
  RETURNING community_id, id, pubkey
), tags AS (
  INSERT INTO event_tags (community_id, event_id, name, value, kind, created_at, pubkey)
  SELECT t.community_id, ins.id, t.name, convert_from(decode(t.value_hex, 'hex'), 'UTF8'),
         t.kind, t.created_at, ins.pubkey
    FROM unnest($8::bigint[], $9::text[], $10::text[], $11::text[], $12::int[], $13::bigint[])
         AS t(community_id, event_id_hex, name, value_hex, kind, created_at)
    JOIN ins ON ins.community_id = t.community_id AND ins.id = decode(t.event_id_hex, 'hex')
  RETURNING 1
)
SELECT community_id, encode(id, 'hex') FROM ins
)sql";

inline constexpr const char* stmt_delete = "waggle_ev_delete";
inline constexpr const char* sql_delete = R"sql(
WITH by_id AS (
  UPDATE events e SET deleted_at = now()
    FROM unnest($1::bigint[], $2::text[], $3::text[]) AS u(community_id, author_hex, target_hex)
   WHERE e.community_id = u.community_id AND e.id = decode(u.target_hex, 'hex')
     AND e.pubkey = decode(u.author_hex, 'hex') AND e.kind <> 5 AND e.deleted_at IS NULL
  RETURNING 1
), by_coordinate AS (
  UPDATE events e SET deleted_at = now()
    FROM (SELECT h.community_id, h.id
            FROM unnest($4::bigint[], $5::text[], $6::int[], $7::text[], $8::bigint[])
                 AS u(community_id, author_hex, kind, d_hex, until)
           CROSS JOIN LATERAL (
                 SELECT x.community_id, x.id FROM events x
                  WHERE x.community_id = u.community_id AND x.kind = u.kind
                    AND x.pubkey = decode(u.author_hex, 'hex')
                    AND coalesce(x.d_tag, '') =
                        convert_from(decode(u.d_hex, 'hex'), 'UTF8') COLLATE "default"
                    AND x.created_at <= u.until AND x.deleted_at IS NULL
                    AND )sql" WAGGLE_COORD_KINDS("x.kind") R"sql(
                 OFFSET 0) AS h) AS t
   WHERE e.community_id = t.community_id AND e.id = t.id AND e.deleted_at IS NULL
  RETURNING 1
)
SELECT (SELECT count(*) FROM by_id), (SELECT count(*) FROM by_coordinate)
)sql";

inline constexpr const char* stmt_ttl = "waggle_ev_ttl";
inline constexpr const char* sql_ttl = "SELECT waggle_refresh_channel_ttl($1::bigint[], $2::text[])";

inline void prepare_statements(pqxx::connection_base& conn) {
  // libpqxx 6 keeps definitions per connection and registers each with the
  // server on first use; re-defining a name with the same text is a no-op,
  // so this is cheap on every batch and survives reconnects.
  conn.prepare(stmt_lock, sql_lock);
  conn.prepare(stmt_check, sql_check);
  conn.prepare(stmt_check_insert, sql_check_insert);
  conn.prepare(stmt_replace, sql_replace);
  conn.prepare(stmt_insert, sql_insert);
  conn.prepare(stmt_delete, sql_delete);
  conn.prepare(stmt_ttl, sql_ttl);
}

}  // namespace waggle::db::write_sql
