#include "bench/load/meters.hpp"

#include <sys/resource.h>

#include <fstream>
#include <thread>

#include <pqxx/pqxx>

namespace waggle::bench {

commit_meter::commit_meter(const std::string& database_url)
    : conn_(std::make_unique<pqxx::connection>(database_url)) {}

commit_meter::~commit_meter() = default;

long long commit_meter::read() {
  pqxx::nontransaction tx{*conn_};
  auto row = tx.exec1("SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()");
  return row[0].as<long long>();
}

void commit_meter::settle() { std::this_thread::sleep_for(settle_time); }

std::optional<rss_reading> read_rss(int pid) {
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  if (!status)
    return std::nullopt;
  rss_reading r;
  bool found = false;
  for (std::string line; std::getline(status, line);) {
    auto kib = [&](size_t skip) { return std::stod(line.substr(skip)) / 1024.0; };
    if (line.rfind("VmRSS:", 0) == 0) {
      r.rss_mib = kib(6);
      found = true;
    } else if (line.rfind("VmHWM:", 0) == 0) {
      r.peak_mib = kib(6);
    }
  }
  return found ? std::optional<rss_reading>{r} : std::nullopt;
}

std::string raise_fd_limit(size_t wanted) {
  rlimit lim{};
  if (getrlimit(RLIMIT_NOFILE, &lim) != 0)
    return "";  // unknown: the connections will say
  if (lim.rlim_cur < lim.rlim_max) {
    lim.rlim_cur = lim.rlim_max;
    if (setrlimit(RLIMIT_NOFILE, &lim) != 0)
      getrlimit(RLIMIT_NOFILE, &lim);
  }
  if (lim.rlim_cur != RLIM_INFINITY && lim.rlim_cur < wanted)
    return "needs " + std::to_string(wanted) + " open files but the limit is " +
           std::to_string(lim.rlim_cur) + " (hard " + std::to_string(lim.rlim_max) +
           "): raise it (ulimit -Hn, or LimitNOFILE)";
  return "";
}

}  // namespace waggle::bench
