#include "actors/support/log.hpp"

#include "db/session.hpp"

#include <atomic>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <mutex>

namespace waggle::log {

namespace {

std::atomic<level> current{level::info};
std::mutex out_mtx;

const char* name_of(level lvl) {
  switch (lvl) {
    case level::debug: return "debug";
    case level::info: return "info";
    case level::warn: return "warn";
    case level::error: return "error";
  }
  return "info";
}

void append_value(std::string& out, std::string_view v) {
  bool quote = v.empty() || v.find_first_of(" \"=\t\n") != std::string_view::npos;
  if (!quote) {
    out += v;
    return;
  }
  out += '"';
  for (char c : v) {
    if (c == '"' || c == '\\')
      out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  out += '"';
}

}  // namespace

void set_level(level lvl) { current = lvl; }

level parse_level(std::string_view name) {
  if (name == "debug") return level::debug;
  if (name == "warn") return level::warn;
  if (name == "error") return level::error;
  return level::info;
}

bool enabled(level lvl) { return lvl >= current.load(std::memory_order_relaxed); }

void write(level lvl, std::string_view component, std::string_view msg,
           std::initializer_list<field> fields) {
  if (!enabled(lvl))
    return;
  using namespace std::chrono;
  auto now = system_clock::now();
  auto secs = system_clock::to_time_t(now);
  auto millis = duration_cast<milliseconds>(now.time_since_epoch()).count() % 1000;
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char ts[64];  // room for any year the compiler can imagine (-Wformat-truncation)
  std::snprintf(ts, sizeof(ts), "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900,
                tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
                static_cast<int>(millis));
  std::string line;
  line.reserve(128);
  line += "ts=";
  line += ts;
  line += " level=";
  line += name_of(lvl);
  line += " component=";
  append_value(line, component);
  line += " msg=";
  append_value(line, msg);
  for (auto& [k, v] : fields) {
    line += ' ';
    line += k;
    line += '=';
    append_value(line, v);
  }
  line += '\n';
  std::lock_guard guard{out_mtx};
  std::fwrite(line.data(), 1, line.size(), stderr);
}

}  // namespace waggle::log

namespace waggle::log {

void session_report(const db::session_report& r) {
  using kind = db::session_report;
  switch (r.kind) {
    case kind::reconnected:
      return info("db", "reconnected", {{"session", std::string{r.session}}});
    case kind::connect_failed:
      return warn("db", "connect failed",
                  {{"session", std::string{r.session}},
                   {"retry_ms", std::to_string(r.retry.count())},
                   {"error", std::string{r.error}}});
    case kind::connection_lost:
      return warn("db", "connection lost", {{"session", std::string{r.session}}});
  }
}

}  // namespace waggle::log
