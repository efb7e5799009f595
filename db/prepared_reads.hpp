#pragma once

// Named prepared statements for the SQL the read path builds per filter
// shape. A history REQ was parsed, analysed and planned on every execution
// (PQexecParams): on a million events that was nearly half of PostgreSQL's
// CPU per REQ, more than running the statement. Prepared, PostgreSQL plans
// the first executions with their values and then keeps a generic plan when
// it costs no more. The text of a statement depends on the filter's shape
// (its fields, tag letters, limit, time bounds), which a client chooses, so
// each session keeps at most `capacity` of them, dropping the least recently
// used (DEALLOCATE).

#include <cstddef>
#include <cstdint>
#include <list>
#include <string>
#include <unordered_map>

#include <pqxx/connection_base>

namespace waggle::db {

class prepared_reads {
 public:
  explicit prepared_reads(size_t capacity = 32) : capacity_(capacity == 0 ? 1 : capacity) {}

  // The name under which `sql` is prepared on `conn` (libpqxx sends the
  // PREPARE with its first execution). A statement that another connection
  // of this object prepared is defined again here: after a reconnect nothing
  // is assumed to survive.
  std::string name_for(pqxx::connection_base& conn, const std::string& sql);

  size_t size() const { return by_sql_.size(); }

 private:
  struct entry {
    std::string sql;
    std::string name;
  };
  size_t capacity_;
  uint64_t next_ = 0;
  const pqxx::connection_base* conn_ = nullptr;
  std::list<entry> lru_;  // most recently used first
  std::unordered_map<std::string_view, std::list<entry>::iterator> by_sql_;
};

}  // namespace waggle::db
