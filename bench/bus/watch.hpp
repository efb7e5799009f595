#pragma once

// waggle-bus-bench: what a step cost and where it waited. CPU of this process
// and of the PostgreSQL server's processes (from /proc), the machine's CPU,
// PostgreSQL's write transactions (xids handed out), commits, WAL, and a
// sampling of pg_stat_activity's wait events of the active backends; and the
// pool hold of the idle-latency test (every connection slot PostgreSQL has
// left taken and blocked behind an advisory lock the tool holds).

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <pqxx/pqxx>

namespace waggle::busbench {

// Cumulative counters at one moment.
struct usage_point {
  int64_t t_ns = 0;
  double process_cpu_s = 0;   // this process (both nodes and the tool)
  double postgres_cpu_s = 0;  // the postmaster and its children
  double server_cpu_s = 0;    // the bus's own server (nats-server), when watched
  double machine_busy_s = 0;  // all CPUs, from /proc/stat
  double machine_total_s = 0;
  int64_t xid = 0;          // next transaction id (write transactions begun)
  int64_t xact_commit = 0;  // pg_stat_database, flushed up to ~1 s late
  int64_t wal_bytes = 0;    // pg_current_wal_lsn
  int64_t wal_syncs = 0;    // pg_stat_wal.wal_sync
};

// The cost of a window, per second of it.
struct usage {
  double seconds = 0;
  double process_cores = 0, postgres_cores = 0, machine_busy = 0;  // machine: share 0..1
  double server_cores = 0;  // the watched server process (nats-server); 0 when none
  double xids_per_s = 0, commits_per_s = 0, wal_kb_per_s = 0, wal_syncs_per_s = 0;
  // Share of wait-event samples of active backends by "type:event" ("CPU"
  // when not waiting), and the mean number of active backends.
  std::map<std::string, double> waits;
  double active_backends = 0;
  uint64_t samples = 0;
  // Share of active-backend samples by statement (its first 40 characters).
  std::map<std::string, double> statements;
  // This process's busiest threads in the window: "name/tid" and cores.
  std::vector<std::pair<std::string, double>> threads;
};

class watcher {
 public:
  // database_url empty: no PostgreSQL (inproc); only process and machine CPU.
  explicit watcher(const std::string& database_url);
  ~watcher();

  usage_point point();
  // Counts this process's CPU too (the NATS server of --bus nats), as server_cores.
  void watch_server(int pid) { server_pid_ = pid; }
  bool watching_server() const { return server_pid_ > 0; }
  // Starts sampling wait events every `every_ms`, ends with the window's usage.
  void begin();
  usage end();

  // The control connection (the lock holder and the bench's statements).
  pqxx::connection* control() { return control_.get(); }

 private:
  void sample_loop();

  std::string url_;
  std::unique_ptr<pqxx::connection> control_, sampler_;
  int postmaster_ = 0;
  int server_pid_ = 0;
  usage_point start_;
  std::thread thread_;
  std::atomic<bool> sampling_{false};
  std::mutex mtx_;
  std::map<std::string, uint64_t> wait_counts_, statement_counts_;
  std::map<int, std::pair<std::string, double>> threads_start_;
  uint64_t samples_ = 0, active_sum_ = 0;
};

// Takes every connection slot PostgreSQL will still give (up to `cap`), each
// connection blocked in SELECT pg_advisory_lock(k) behind the watcher's
// control connection, which holds k. Release ends them all.
class pool_hold {
 public:
  pool_hold(watcher& w, const std::string& database_url, size_t cap);
  ~pool_hold();
  void release();

  size_t held = 0;
  size_t waiting = 0;         // of them, seen waiting on the lock in pg_stat_activity
  std::string refused;        // PostgreSQL's answer to the connection that did not fit
  std::string probe_refused;  // and to one more attempt once all were in place
  int max_connections = 0;
  int reserved = 0;  // superuser_reserved_connections
  bool superuser = false;
  int total_backends = 0;  // client backends of the server while held

 private:
  watcher& w_;
  std::vector<std::thread> threads_;
  bool released_ = false;
};

std::string machine_description();

}  // namespace waggle::busbench
