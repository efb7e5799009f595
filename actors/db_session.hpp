#pragma once

// A libpqxx connection owned by exactly one (detached) actor, with reconnect
// and exponential backoff. While the database is down, work fails fast
// instead of queuing behind a dead socket.

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <pqxx/connection>

namespace waggle {

class db_session {
 public:
  using clock = std::chrono::steady_clock;

  // `setup` statements run on every new connection (session settings).
  db_session(std::string url, std::string role, std::vector<std::string> setup = {});
  // The live connection, reconnecting if the backoff allows; nullptr when the
  // database is unreachable (the caller answers "unavailable").
  pqxx::connection* get();
  // Call after pqxx::broken_connection: drops the connection, starts backoff.
  void reset();
  bool connected() const { return conn_ != nullptr; }

 private:
  std::string url_;
  std::vector<std::string> setup_;
  std::string role_;  // for logs: "writer-1", "reader-0", ...
  std::unique_ptr<pqxx::connection> conn_;
  clock::time_point next_attempt_{};
  std::chrono::milliseconds backoff_{0};
};

}  // namespace waggle
