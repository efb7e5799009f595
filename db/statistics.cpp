#include "db/statistics.hpp"

#include <pqxx/nontransaction>
#include <pqxx/result>

namespace waggle::db {

const std::vector<std::string>& writer_session_settings() {
  static const std::vector<std::string> settings{"SET plan_cache_mode = force_generic_plan",
                                                 "SET enable_seqscan = off"};
  return settings;
}

std::vector<std::string> analyze_missing_statistics(pqxx::connection& conn) {
  std::vector<std::string> missing;
  {
    pqxx::nontransaction tx(conn);
    // pg_relation_size is the table's main fork now, not relpages (which a
    // never-analyzed table has at 0 however much it holds).
    auto rows = tx.exec(R"sql(
      SELECT quote_ident(c.relname)
        FROM pg_class c
       WHERE c.relnamespace = current_schema()::regnamespace
         AND c.relkind = 'r' AND c.reltuples < 0 AND pg_relation_size(c.oid) > 0
       ORDER BY c.relname)sql");
    for (const auto& r : rows)
      missing.push_back(r[0].as<std::string>());
  }
  for (const auto& table : missing) {
    pqxx::nontransaction tx(conn);
    tx.exec0("ANALYZE " + table);  // a quoted catalog name, never input
  }
  return missing;
}

}  // namespace waggle::db
