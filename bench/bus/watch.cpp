#include "bench/bus/watch.hpp"

#include <dirent.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <sstream>

#include "bench/bus/cluster.hpp"

namespace waggle::busbench {

namespace {

constexpr const char* hold_app = "waggle-bus-bench-hold";
constexpr int64_t hold_lock_key = 7272727;

double ticks() { return static_cast<double>(sysconf(_SC_CLK_TCK)); }

// utime + stime (s) and the parent of a process; false when it is gone.
bool proc_stat(int pid, double& cpu_s, int& ppid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(f, line))
    return false;
  auto close = line.rfind(')');
  if (close == std::string::npos)
    return false;
  std::istringstream in(line.substr(close + 2));
  std::vector<std::string> fields;
  for (std::string t; in >> t;)
    fields.push_back(t);
  if (fields.size() < 13)
    return false;
  ppid = std::stoi(fields[1]);
  cpu_s = (std::stod(fields[11]) + std::stod(fields[12])) / ticks();
  return true;
}

// Every thread of this process: tid -> (name, CPU seconds).
std::map<int, std::pair<std::string, double>> thread_cpu() {
  std::map<int, std::pair<std::string, double>> out;
  if (DIR* d = opendir("/proc/self/task")) {
    while (auto* e = readdir(d)) {
      char* end = nullptr;
      long tid = std::strtol(e->d_name, &end, 10);
      if (*end != '\0' || tid <= 0)
        continue;
      std::ifstream f("/proc/self/task/" + std::to_string(tid) + "/stat");
      std::string line;
      if (!std::getline(f, line))
        continue;
      auto open = line.find('('), close = line.rfind(')');
      if (open == std::string::npos || close == std::string::npos)
        continue;
      std::istringstream in(line.substr(close + 2));
      std::vector<std::string> fields;
      for (std::string t; in >> t;)
        fields.push_back(t);
      if (fields.size() < 13)
        continue;
      out[static_cast<int>(tid)] = {line.substr(open + 1, close - open - 1),
                                    (std::stod(fields[11]) + std::stod(fields[12])) / ticks()};
    }
    closedir(d);
  }
  return out;
}

void machine_cpu(double& busy_s, double& total_s) {
  std::ifstream f("/proc/stat");
  std::string cpu;
  double user = 0, nice = 0, sys = 0, idle = 0, iowait = 0, irq = 0, softirq = 0, steal = 0;
  f >> cpu >> user >> nice >> sys >> idle >> iowait >> irq >> softirq >> steal;
  busy_s = (user + nice + sys + irq + softirq + steal) / ticks();
  total_s = busy_s + (idle + iowait) / ticks();
}

std::string with_app_name(const std::string& url, const std::string& app) {
  if (url.find("://") == std::string::npos)
    return url + " application_name=" + app;
  return url + (url.find('?') == std::string::npos ? "?" : "&") + "application_name=" + app;
}

}  // namespace

std::string machine_description() {
  std::string model;
  std::ifstream cpuinfo("/proc/cpuinfo");
  for (std::string line; std::getline(cpuinfo, line);)
    if (line.rfind("model name", 0) == 0) {
      model = line.substr(line.find(':') + 2);
      break;
    }
  long long mem_kb = 0;
  std::ifstream meminfo("/proc/meminfo");
  for (std::string line; std::getline(meminfo, line);)
    if (line.rfind("MemTotal:", 0) == 0)
      mem_kb = std::stoll(line.substr(9));
  utsname u{};
  uname(&u);
  return (model.empty() ? std::string{"unknown CPU"} : model) + ", " +
         std::to_string(std::thread::hardware_concurrency()) + " CPUs, " +
         std::to_string(mem_kb / 1024 / 1024) + " GiB, Linux " + u.release;
}

watcher::watcher(const std::string& database_url) : url_(database_url) {
  if (url_.empty())
    return;
  control_ = std::make_unique<pqxx::connection>(with_app_name(url_, "waggle-bus-bench"));
  sampler_ = std::make_unique<pqxx::connection>(with_app_name(url_, "waggle-bus-bench-sampler"));
  pqxx::nontransaction tx{*control_};
  auto backend = tx.exec1("SELECT pg_backend_pid()")[0].as<int>();
  double cpu = 0;
  proc_stat(backend, cpu, postmaster_);
}

watcher::~watcher() {
  if (thread_.joinable()) {
    sampling_ = false;
    thread_.join();
  }
}

usage_point watcher::point() {
  usage_point p;
  p.t_ns = now_ns();
  int ppid = 0;
  proc_stat(static_cast<int>(getpid()), p.process_cpu_s, ppid);
  machine_cpu(p.machine_busy_s, p.machine_total_s);
  if (server_pid_ > 0)
    proc_stat(server_pid_, p.server_cpu_s, ppid);
  if (!control_)
    return p;
  if (postmaster_ > 0) {
    if (DIR* d = opendir("/proc")) {
      while (auto* e = readdir(d)) {
        char* end = nullptr;
        long pid = std::strtol(e->d_name, &end, 10);
        if (*end != '\0' || pid <= 0)
          continue;
        double cpu = 0;
        int parent = 0;
        if (proc_stat(static_cast<int>(pid), cpu, parent) &&
            (pid == postmaster_ || parent == postmaster_))
          p.postgres_cpu_s += cpu;
      }
      closedir(d);
    }
  }
  pqxx::nontransaction tx{*control_};
  auto r = tx.exec1(
    "SELECT pg_snapshot_xmax(pg_current_snapshot())::text::bigint,"
    " (SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()),"
    " pg_current_wal_lsn() - '0/0'::pg_lsn,"
    " (SELECT wal_sync FROM pg_stat_wal)");
  p.xid = r[0].as<int64_t>();
  p.xact_commit = r[1].as<int64_t>();
  p.wal_bytes = static_cast<int64_t>(r[2].as<double>());
  p.wal_syncs = r[3].as<int64_t>();
  return p;
}

void watcher::sample_loop() {
  while (sampling_) {
    try {
      pqxx::nontransaction tx{*sampler_};
      auto rows = tx.exec(
        "SELECT coalesce(wait_event_type || ':' || wait_event, 'CPU'),"
        " left(regexp_replace(query, '\\s+', ' ', 'g'), 40) FROM pg_stat_activity"
        " WHERE state = 'active' AND pid <> pg_backend_pid() AND datname = current_database()"
        " AND coalesce(application_name, '') NOT LIKE 'waggle-bus-bench%'");
      std::lock_guard g{mtx_};
      ++samples_;
      active_sum_ += rows.size();
      for (const auto& row : rows) {
        ++wait_counts_[row[0].as<std::string>()];
        ++statement_counts_[row[1].as<std::string>()];
      }
    } catch (const std::exception&) {
      return;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds{10});
  }
}

void watcher::begin() {
  {
    std::lock_guard g{mtx_};
    wait_counts_.clear();
    statement_counts_.clear();
    samples_ = active_sum_ = 0;
  }
  threads_start_ = thread_cpu();
  start_ = point();
  if (sampler_) {
    sampling_ = true;
    thread_ = std::thread([this] { sample_loop(); });
  }
}

usage watcher::end() {
  if (thread_.joinable()) {
    sampling_ = false;
    thread_.join();
  }
  auto e = point();
  auto threads_end = thread_cpu();
  usage u;
  u.seconds = static_cast<double>(e.t_ns - start_.t_ns) / 1e9;
  if (u.seconds <= 0)
    return u;
  u.process_cores = (e.process_cpu_s - start_.process_cpu_s) / u.seconds;
  u.postgres_cores = (e.postgres_cpu_s - start_.postgres_cpu_s) / u.seconds;
  u.server_cores = (e.server_cpu_s - start_.server_cpu_s) / u.seconds;
  auto total = e.machine_total_s - start_.machine_total_s;
  u.machine_busy = total > 0 ? (e.machine_busy_s - start_.machine_busy_s) / total : 0;
  u.xids_per_s = static_cast<double>(e.xid - start_.xid) / u.seconds;
  u.commits_per_s = static_cast<double>(e.xact_commit - start_.xact_commit) / u.seconds;
  u.wal_kb_per_s = static_cast<double>(e.wal_bytes - start_.wal_bytes) / 1024.0 / u.seconds;
  u.wal_syncs_per_s = static_cast<double>(e.wal_syncs - start_.wal_syncs) / u.seconds;
  std::lock_guard g{mtx_};
  u.samples = samples_;
  uint64_t all = 0;
  for (auto& [k, n] : wait_counts_)
    all += n;
  for (auto& [k, n] : wait_counts_)
    u.waits[k] = all ? static_cast<double>(n) / static_cast<double>(all) : 0;
  for (auto& [k, n] : statement_counts_)
    u.statements[k] = all ? static_cast<double>(n) / static_cast<double>(all) : 0;
  for (auto& [tid, v] : threads_end) {
    auto before = threads_start_.find(tid);
    double cpu = v.second - (before == threads_start_.end() ? 0 : before->second.second);
    u.threads.emplace_back(v.first + "/" + std::to_string(tid), cpu / u.seconds);
  }
  std::sort(u.threads.begin(), u.threads.end(),
            [](const auto& a, const auto& b) { return a.second > b.second; });
  if (u.threads.size() > 4)
    u.threads.resize(4);
  u.active_backends = samples_ ? static_cast<double>(active_sum_) / static_cast<double>(samples_)
                               : 0;
  return u;
}

pool_hold::pool_hold(watcher& w, const std::string& database_url, size_t cap) : w_(w) {
  auto* ctl = w.control();
  {
    pqxx::nontransaction tx{*ctl};
    tx.exec1("SELECT pg_advisory_lock(" + std::to_string(hold_lock_key) + ")");
    max_connections = tx.exec1("SHOW max_connections")[0].as<int>();
    reserved = tx.exec1("SHOW superuser_reserved_connections")[0].as<int>();
    superuser =
      tx.exec1("SELECT rolsuper FROM pg_roles WHERE rolname = current_user")[0].as<bool>();
  }
  auto url = with_app_name(database_url, hold_app);
  while (held < cap) {
    std::unique_ptr<pqxx::connection> c;
    try {
      c = std::make_unique<pqxx::connection>(url);
    } catch (const std::exception& e) {
      refused = e.what();
      break;
    }
    ++held;
    threads_.emplace_back([c = std::move(c)]() mutable {
      try {
        pqxx::nontransaction tx{*c};
        tx.exec("SELECT pg_advisory_lock(" + std::to_string(hold_lock_key) + ")");
      } catch (const std::exception&) {
        // terminated by release()
      }
      c.reset();
    });
  }
  for (int i = 0; i < 100; ++i) {
    pqxx::nontransaction tx{*ctl};
    waiting = tx.exec1("SELECT count(*) FROM pg_stat_activity WHERE application_name = '" +
                       std::string{hold_app} + "' AND wait_event_type = 'Lock'")[0]
                .as<size_t>();
    total_backends =
      tx.exec1("SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'client backend'")[0]
        .as<int>();
    if (waiting >= held)
      break;
    std::this_thread::sleep_for(std::chrono::milliseconds{50});
  }
  try {
    pqxx::connection extra{url};
    probe_refused = "(connected: a slot was still free)";
  } catch (const std::exception& e) {
    probe_refused = e.what();
  }
}

void pool_hold::release() {
  if (released_)
    return;
  released_ = true;
  {
    pqxx::nontransaction tx{*w_.control()};
    tx.exec("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = '" +
            std::string{hold_app} + "'");
    tx.exec("SELECT pg_advisory_unlock(" + std::to_string(hold_lock_key) + ")");
  }
  for (auto& t : threads_)
    t.join();
  threads_.clear();
  // Until the server has let the slots go.
  for (int i = 0; i < 100; ++i) {
    pqxx::nontransaction tx{*w_.control()};
    if (tx.exec1("SELECT count(*) FROM pg_stat_activity WHERE application_name = '" +
                 std::string{hold_app} + "'")[0]
          .as<int>() == 0)
      break;
    std::this_thread::sleep_for(std::chrono::milliseconds{50});
  }
}

pool_hold::~pool_hold() {
  try {
    release();
  } catch (...) {
  }
}

}  // namespace waggle::busbench
