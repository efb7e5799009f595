#include "db/event_store.hpp"

#include <pqxx/nontransaction>
#include <pqxx/prepared_statement>
#include <pqxx/result>

#include "db/sql_util.hpp"

// What `waggle sync` sends up: the stored events of ids a reconciliation
// found only here (docs/negentropy.md, "waggle sync").

namespace waggle::db {

std::vector<stored_event> live_events_by_id(pqxx::connection& conn, int64_t community_id,
                                            const std::vector<std::string>& ids_hex, int64_t now) {
  std::vector<stored_event> out;
  if (ids_hex.empty())
    return out;
  sql::array_literal ids;
  for (const auto& id : ids_hex)
    if (sql::is_hex64(id))
      ids.bytea_hex(id);
  pqxx::nontransaction tx(conn);
  // Oldest first: a channel's commands reach the other relay in the order
  // they were authorised here.
  auto r = tx.exec_params(
    "SELECT raw, kind FROM events WHERE community_id = $1 AND id = ANY($2::bytea[]) "
    "AND deleted_at IS NULL AND (expires_at IS NULL OR expires_at > $3) "
    "ORDER BY created_at, id",
    community_id, ids.str(), now);
  out.reserve(r.size());
  for (const auto& row : r)
    out.push_back({std::string(row[0].c_str(), row[0].size()), row[1].as<int32_t>()});
  return out;
}

std::vector<std::string> ids_of_kinds(pqxx::connection& conn, int64_t community_id,
                                      const std::vector<int32_t>& kinds) {
  std::vector<std::string> out;
  if (kinds.empty())
    return out;
  sql::array_literal k;
  for (auto kind : kinds)
    k.integer(kind);
  pqxx::nontransaction tx(conn);
  auto r = tx.exec_params("SELECT encode(id, 'hex') FROM events WHERE community_id = $1 "
                          "AND kind = ANY($2::int[]) AND deleted_at IS NULL",
                          community_id, k.str());
  out.reserve(r.size());
  for (const auto& row : r)
    out.push_back(row[0].as<std::string>());
  return out;
}

}  // namespace waggle::db
