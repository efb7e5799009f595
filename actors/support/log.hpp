#pragma once

// Structured logs: one line per record, logfmt (`ts=… level=… component=… msg="…" k=v`),
// to stderr. Secrets never go through here: callers pass ids and counts, not
// keys, tokens or database URLs (which may carry a password).

#include <initializer_list>
#include <string>
#include <string_view>
#include <utility>

namespace waggle::log {

enum class level { debug = 0, info, warn, error };

void set_level(level lvl);
level parse_level(std::string_view name);  // "debug", "info", "warn", "error"
bool enabled(level lvl);

using field = std::pair<std::string_view, std::string>;
void write(level lvl, std::string_view component, std::string_view msg,
           std::initializer_list<field> fields = {});

inline void debug(std::string_view c, std::string_view m, std::initializer_list<field> f = {}) {
  if (enabled(level::debug))
    write(level::debug, c, m, f);
}
inline void info(std::string_view c, std::string_view m, std::initializer_list<field> f = {}) {
  write(level::info, c, m, f);
}
inline void warn(std::string_view c, std::string_view m, std::initializer_list<field> f = {}) {
  write(level::warn, c, m, f);
}
inline void error(std::string_view c, std::string_view m, std::initializer_list<field> f = {}) {
  write(level::error, c, m, f);
}

}  // namespace waggle::log

namespace waggle::db {
struct session_report;
}

namespace waggle::log {

// A database session's connection changes, as log lines (component "db").
void session_report(const db::session_report& r);

}  // namespace waggle::log
