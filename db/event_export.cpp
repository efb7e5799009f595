#include "db/event_export.hpp"

#include <limits>
#include <string>

#include <pqxx/pqxx>

#include "messages/proto/nip29.hpp"
#include "messages/proto/relay_kinds.hpp"

namespace waggle::db {

namespace {

// proto::nip29::replay_rank as SQL, written out from the function itself so
// the two cannot differ: within one second a channel's creation and
// admissions come before its posts, removals and deletions after.
std::string replay_rank_sql() {
  std::string sql = "CASE kind";
  for (int32_t k = 9000; k <= 9022; ++k)
    if (proto::nip29::replay_rank(k) != proto::nip29::replay_rank(1))
      sql += " WHEN " + std::to_string(k) + " THEN " + std::to_string(proto::nip29::replay_rank(k));
  return sql + " ELSE " + std::to_string(proto::nip29::replay_rank(1)) + " END";
}

}  // namespace

export_counts export_events(pqxx::connection& conn, int64_t community_id,
                            const export_range& range, int64_t now, size_t chunk,
                            const std::function<void(std::string_view raw)>& sink,
                            const std::function<void(const export_counts&)>& progress) {
  export_counts counts;
  pqxx::read_transaction tx(conn);
  // The order is the one an import must apply (commands before the posts
  // they allow, within a second too: replay_rank); ties by id make two
  // exports of one set byte-identical.
  // events_live_created serves it (backwards, then an incremental sort of
  // each second's ties by id), so rows stream from the first FETCH on.
  tx.exec_params(
    "DECLARE waggle_export NO SCROLL CURSOR FOR "
    "SELECT kind, raw FROM events "
    "WHERE community_id = $1 AND deleted_at IS NULL "
    "AND (expires_at IS NULL OR expires_at > $2) "
    "AND created_at >= $3 AND created_at <= $4 "
    "ORDER BY created_at, " + replay_rank_sql() + ", id",
    community_id, now, range.since.value_or(std::numeric_limits<int64_t>::min()),
    range.until.value_or(std::numeric_limits<int64_t>::max()));
  const std::string fetch = "FETCH " + std::to_string(chunk ? chunk : 1) + " FROM waggle_export";
  for (;;) {
    auto rows = tx.exec(fetch);
    for (const auto& row : rows) {
      // Filtered here rather than in SQL: one predicate, shared with import.
      if (proto::is_relay_derived(row[0].as<int32_t>())) {
        ++counts.relay_derived;
        continue;
      }
      sink(std::string_view{row[1].c_str(), row[1].size()});
      ++counts.events;
    }
    if (progress)
      progress(counts);
    if (rows.size() < (chunk ? chunk : 1))
      break;
  }
  tx.exec("CLOSE waggle_export");
  return counts;
}

}  // namespace waggle::db
