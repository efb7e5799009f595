#pragma once

// What the tool reads off the system under test: PostgreSQL's commit counter
// and the relay's resident memory.

#include <chrono>
#include <memory>
#include <optional>
#include <string>

#include <pqxx/connection>

namespace waggle::bench {

// xact_commit of one database, from pg_stat_database. Backends flush their
// counters at most once a second while busy and within 10 s of going idle
// (PostgreSQL 15's PGSTAT_IDLE_INTERVAL), so a reading is only complete after
// settle(): callers bracket equal windows with it and compare deltas.
class commit_meter {
 public:
  explicit commit_meter(const std::string& database_url);
  ~commit_meter();
  long long read();
  static void settle();
  static constexpr std::chrono::seconds settle_time{11};

 private:
  std::unique_ptr<pqxx::connection> conn_;
};

struct rss_reading {
  double rss_mib = 0;
  double peak_mib = 0;
};
std::optional<rss_reading> read_rss(int pid);

// Raises the soft limit of open descriptors to the hard one (each subscriber
// is a socket: 5,000 of them pass the usual soft limit of 1,024). Returns ""
// or why `wanted` descriptors cannot be had.
std::string raise_fd_limit(size_t wanted);

}  // namespace waggle::bench
