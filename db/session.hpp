#pragma once

// A libpqxx connection owned by exactly one (detached) actor, with reconnect
// and exponential backoff. While the database is down, work fails fast
// instead of queuing behind a dead socket. A plain class: the actor that
// owns it decides when it runs, and what it reports goes to whoever the
// owner names (the actors layer logs it).

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <pqxx/connection>

namespace waggle::db {

// A change of a session's connection, for the owner's log. libpq's error text
// names host and port, never the password.
struct session_report {
  enum kind_t : uint8_t { reconnected, connect_failed, connection_lost } kind;
  std::string_view session;       // "writer-1", "reader-0", ...
  std::chrono::milliseconds retry{0};  // connect_failed: next attempt after this
  std::string_view error;         // connect_failed: libpq's message
};
using session_reporter = std::function<void(const session_report&)>;

class session {
 public:
  using clock = std::chrono::steady_clock;

  // `setup` statements run on every new connection (session settings).
  session(std::string url, std::string role, std::vector<std::string> setup = {},
          session_reporter report = {});
  // The live connection, reconnecting if the backoff allows; nullptr when the
  // database is unreachable (the caller answers "unavailable").
  pqxx::connection* get();
  // Call after pqxx::broken_connection: drops the connection, starts backoff.
  void reset();
  bool connected() const { return conn_ != nullptr; }

 private:
  void report(session_report r) const;

  std::string url_;
  std::vector<std::string> setup_;
  std::string role_;
  session_reporter report_;
  std::unique_ptr<pqxx::connection> conn_;
  clock::time_point next_attempt_{};
  std::chrono::milliseconds backoff_{0};
};

}  // namespace waggle::db
