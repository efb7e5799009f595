#include "db/prepared_reads.hpp"

namespace waggle::db {

std::string prepared_reads::name_for(pqxx::connection_base& conn, const std::string& sql) {
  if (&conn != conn_) {
    // Another connection (a reconnect may even reuse the address): its
    // statements are not ours to drop, and ours are not there.
    lru_.clear();
    by_sql_.clear();
    conn_ = &conn;
  }
  if (auto i = by_sql_.find(sql); i != by_sql_.end()) {
    lru_.splice(lru_.begin(), lru_, i->second);
    // A no-op when this connection has it; defines it again on a new
    // connection that took the old one's address.
    conn.prepare(i->second->name, i->second->sql);
    return i->second->name;
  }
  if (by_sql_.size() >= capacity_) {
    std::string old = std::move(lru_.back().name);
    by_sql_.erase(lru_.back().sql);
    lru_.pop_back();
    conn.unprepare(old);  // DEALLOCATE, if it ever ran here
  }
  lru_.push_front({sql, "waggle_read_" + std::to_string(++next_)});
  by_sql_.emplace(lru_.front().sql, lru_.begin());
  conn.prepare(lru_.front().name, lru_.front().sql);
  return lru_.front().name;
}

}  // namespace waggle::db
