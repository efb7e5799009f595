#pragma once

// Internals of db::replica_pool shared by its two source files: the pool and
// its leases (replica_pool.cpp), the connector and watchdog threads
// (replica_pool_threads.cpp). Not for other callers.

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <pqxx/connection>

#include "db/prepared_reads.hpp"
#include "db/replica_pool.hpp"

namespace waggle::db::detail {

using pool_clock = std::chrono::steady_clock;

// One connection of the pool. Only the thread holding its lease (or the
// connector, before it is published) touches `conn` and `prepared`; the
// watchdog fields are guarded by the pool's mutex.
struct replica_slot {
  std::unique_ptr<pqxx::connection> conn;
  prepared_reads prepared;
  std::string backend;
  int backend_pid = 0;
  // Our own descriptor of libpq's socket (F_DUPFD). poll() and shutdown() act
  // on the socket through it, so the watchdog can never hit a descriptor
  // number that libpq already closed (it does on EOF) and the process reused.
  int watch_fd = -1;
  pool_clock::time_point deadline{};  // while leased: when the watchdog fires
  bool fired = false;                 // the watchdog shut this socket down

  replica_slot() = default;
  replica_slot(const replica_slot&) = delete;
  replica_slot& operator=(const replica_slot&) = delete;
  ~replica_slot();  // closes the connection, then our descriptor
};

struct replica_pool_state {
  replica_pool_options opts;
  std::string conninfo;           // empty when the URL did not parse
  replica_pool_counters counters;

  std::mutex m;
  std::condition_variable available;  // acquire waits here for a connection or a failed connect
  std::condition_variable demand;     // the connector waits here for `wanted`
  std::condition_variable watch;      // the watchdog waits here for a first armed lease
  std::vector<std::unique_ptr<replica_slot>> idle;  // most recently given back last
  std::vector<replica_slot*> armed;                 // leased, owned by their leases
  size_t wanted = 0;                  // connections asked for and not yet opened
  bool failing = false;               // the last connect failed
  pool_clock::time_point next_attempt{};
  std::chrono::milliseconds backoff{0};
  bool watchdog_sleeping = false;     // waiting with no deadline: arming must wake it
  bool stopping = false;

  size_t open_locked() const { return static_cast<size_t>(counters.open.load()); }
  void report(const session_report& r) const {
    if (opts.report)
      opts.report(r);
  }
};

// The connector thread: opens one connection per unit of `wanted`, backs off
// after failures. The watchdog thread: shuts down the sockets of leases past
// their deadline. Both return once `stopping` is set.
void run_connector(replica_pool_state& s);
void run_watchdog(replica_pool_state& s);

}  // namespace waggle::db::detail
