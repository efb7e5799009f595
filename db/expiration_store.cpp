#include "db/expiration_store.hpp"

#include <string>
#include <vector>

#include <pqxx/result>
#include <pqxx/transaction>

#include "db/indexed_tags.hpp"
#include "db/sql_util.hpp"
#include "messages/proto/event.hpp"

namespace waggle::db {

using namespace sql;

namespace {

// Communities with at least one due row: one index probe of events_expiring
// per community, so a tick with nothing to do is one cheap statement.
constexpr const char* sql_due_communities = R"sql(
SELECT c.id FROM communities c
 WHERE EXISTS (SELECT 1 FROM events e
                WHERE e.community_id = c.id AND e.expires_at IS NOT NULL AND e.expires_at <= $1)
 ORDER BY c.id
)sql";

// One transaction's share, oldest expiry first (a range scan of
// events_expiring that reads only due rows).
constexpr const char* sql_take_due = R"sql(
SELECT encode(e.id, 'hex'), e.kind, e.created_at, e.raw FROM events e
 WHERE e.community_id = $1 AND e.expires_at IS NOT NULL AND e.expires_at <= $2
 ORDER BY e.expires_at
 LIMIT $3
   FOR UPDATE SKIP LOCKED
)sql";

// The tag rows by their full key (event_tags_lookup): event_tags has no index
// by event id, and needs none, since the rows follow from the event itself
// (db/indexed_tags.hpp). Values travel as hex, as on the write path.
constexpr const char* sql_delete_tags = R"sql(
DELETE FROM event_tags t
 USING unnest($2::text[], $3::text[], $4::bigint[], $5::text[]) AS u(name, value_hex, created_at, event_hex)
 WHERE t.community_id = $1 AND t.name = u.name
   AND t.value = convert_from(decode(u.value_hex, 'hex'), 'UTF8') COLLATE "default"
   AND t.created_at = u.created_at AND t.event_id = decode(u.event_hex, 'hex')
)sql";

constexpr const char* sql_delete_events = R"sql(
DELETE FROM events e
 USING unnest($2::text[]) AS u(id_hex)
 WHERE e.community_id = $1 AND e.id = decode(u.id_hex, 'hex')
)sql";

// Deletes up to `limit` due events of one community in one transaction;
// returns how many.
size_t reap_one(pqxx::connection& conn, int64_t community_id, int64_t now, size_t limit) {
  pqxx::work tx(conn);
  auto due = tx.exec_params(sql_take_due, community_id, now, static_cast<int64_t>(limit));
  if (due.empty()) {
    tx.commit();
    return 0;
  }
  array_literal ids, t_name, t_value, t_created, t_event;
  for (const auto& row : due) {
    auto id = row[0].as<std::string>();
    auto kind = row[1].as<int32_t>();
    auto created_at = row[2].as<int64_t>();
    ids.text(id);
    // `raw` is our own canonical rendering, so it parses; if it ever did not,
    // its tag rows would stay behind, which no read serves (reads join events).
    auto ev = proto::parse_event(row[3].as<std::string>());
    if (!ev)
      continue;
    for (const auto& [name, value] : indexed_tags(*ev)) {
      if (kind == 5 && (name == "e" || name == "a"))
        continue;  // the NIP-09 tombstone outlives its expired deletion
      t_name.text(name);
      t_value.text(hex_of(value));
      t_created.integer(created_at);
      t_event.text(id);
    }
  }
  if (!t_name.empty())
    tx.exec_params(sql_delete_tags, community_id, t_name.str(), t_value.str(), t_created.str(),
                   t_event.str());
  auto gone = tx.exec_params(sql_delete_events, community_id, ids.str());
  tx.commit();
  return static_cast<size_t>(gone.affected_rows());
}

}  // namespace

reap_result reap_expired_events(pqxx::connection& conn, int64_t now, const reap_limits& limits) {
  reap_result out;
  if (limits.per_transaction == 0 || limits.transactions == 0)
    return out;
  std::vector<int64_t> communities;
  {
    pqxx::read_transaction tx(conn);
    for (const auto& row : tx.exec_params(sql_due_communities, now))
      communities.push_back(row[0].as<int64_t>());
    tx.commit();
  }
  for (auto community_id : communities) {
    for (;;) {
      if (out.transactions == limits.transactions) {
        out.more = true;
        return out;
      }
      auto n = reap_one(conn, community_id, now, limits.per_transaction);
      ++out.transactions;
      out.events += n;
      // Fewer than asked for: this community has no more due rows that are
      // not locked right now (locked ones wait for a later call).
      if (n < limits.per_transaction)
        break;
    }
  }
  return out;
}

}  // namespace waggle::db
