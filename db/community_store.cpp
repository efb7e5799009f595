#include "db/community_store.hpp"

#include <cctype>

#include <pqxx/except>
#include <pqxx/result>
#include <pqxx/transaction>

namespace waggle::db {

namespace {

constexpr const char* community_columns
  = "id, host, name, archived_at IS NOT NULL, policy, description, icon";

community community_of(const pqxx::row& row) {
  community c;
  c.id = row[0].as<int64_t>();
  c.host = row[1].as<std::string>();
  c.name = row[2].as<std::string>();
  c.archived = row[3].as<bool>();
  c.policy = parse_community_policy(row[4].as<std::string>()).value_or(community_policy::closed);
  c.description = row[5].as<std::string>();
  c.icon = row[6].as<std::string>();
  return c;
}

}  // namespace

std::vector<community> load_communities(pqxx::connection& conn) {
  pqxx::read_transaction tx(conn);
  std::vector<community> out;
  for (const auto& row : tx.exec("SELECT " + std::string(community_columns)
                                 + " FROM communities ORDER BY id"))
    out.push_back(community_of(row));
  return out;
}

result<community> add_community(pqxx::connection& conn, std::string_view host_in,
                                std::string_view name, community_policy policy) {
  std::string host = normalize_host(host_in);
  if (host.empty())
    return make_status(ec::invalid, "empty host");
  for (unsigned char c : host)
    if (c < 0x21 || c == 0x7f || c == '/' || c == '\\')
      return make_status(ec::invalid, "host contains a character a Host header cannot carry");
  try {
    pqxx::work tx(conn);
    // Idempotent and case-insensitive: the unique index is on lower(host).
    // DO NOTHING then SELECT (rather than DO UPDATE) keeps the existing row,
    // name and archive state untouched.
    auto ins = tx.exec_params(
      "INSERT INTO communities (host, name, policy) VALUES ($1, $2, $3) "
      "ON CONFLICT ((lower(host))) DO NOTHING RETURNING "
        + std::string(community_columns),
      host, std::string(name), std::string(name_of(policy)));
    pqxx::result r = ins;
    if (r.empty())
      r = tx.exec_params(
        "SELECT " + std::string(community_columns)
          + " FROM communities WHERE lower(host) = lower($1)",
        host);
    tx.commit();
    if (r.empty())
      return make_status(ec::internal, "community vanished while being added");
    return community_of(r[0]);
  } catch (const pqxx::broken_connection&) {
    return make_status(ec::unavailable, "database unavailable");
  } catch (const pqxx::sql_error& e) {
    return make_status(ec::internal, std::string("could not add community (SQLSTATE ") +
                                       e.sqlstate() + ")");
  }
}

}  // namespace waggle::db
