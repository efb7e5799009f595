#pragma once

// Schema migrations: migrations/NNNN_name.sql, embedded into the binary at
// build time, applied in order, each in its own transaction, recorded in
// schema_migrations with a SHA-256 checksum, under an advisory lock so that
// two nodes starting at once do not race.

#include <string>
#include <vector>

#include <pqxx/connection>

#include "messages/proto/status.hpp"

namespace waggle::db {

struct migration {
  int version = 0;
  std::string name;      // e.g. "0001_init"
  std::string sql;
  std::string checksum;  // sha256 hex of sql
};

// The migrations compiled into this binary, in version order.
const std::vector<migration>& embedded_migrations();

// Applies what is missing. Refuses (ec::internal, naming the migration) if an
// applied migration's checksum differs from the embedded one, or if the
// database has a migration this binary does not know.
result<int> apply_migrations(pqxx::connection& conn, const std::vector<migration>& all);

// True when every embedded migration is applied with a matching checksum.
bool migrations_current(pqxx::connection& conn, const std::vector<migration>& all);

}  // namespace waggle::db
