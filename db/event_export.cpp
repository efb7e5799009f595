#include "db/event_export.hpp"

#include <limits>
#include <string>

#include <pqxx/pqxx>

#include "messages/proto/relay_kinds.hpp"

namespace waggle::db {

export_counts export_events(pqxx::connection& conn, int64_t community_id,
                            const export_range& range, int64_t now, size_t chunk,
                            const std::function<void(std::string_view raw)>& sink,
                            const std::function<void(const export_counts&)>& progress) {
  export_counts counts;
  pqxx::read_transaction tx(conn);
  // The order is the one an import must apply (commands before the posts
  // they allow); ties by id make two exports of one set byte-identical.
  // events_live_created serves it (backwards, then an incremental sort of
  // each second's ties by id), so rows stream from the first FETCH on.
  tx.exec_params(
    "DECLARE waggle_export NO SCROLL CURSOR FOR "
    "SELECT kind, raw FROM events "
    "WHERE community_id = $1 AND deleted_at IS NULL "
    "AND (expires_at IS NULL OR expires_at > $2) "
    "AND created_at >= $3 AND created_at <= $4 "
    "ORDER BY created_at, id",
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
