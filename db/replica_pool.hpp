#pragma once

// A bounded pool of read-only connections to ONE reader (a streaming standby),
// shared by the reader sessions, each of which blocks in libpqxx on its own
// thread. Built so that a reader that is down, slow or blackholed costs a
// routed read at most its acquire budget (or statement_timeout + grace once
// leased), never the node:
//
// - Lazy: the constructor opens nothing. Connections are opened by a
//   background connector thread, because libpq's connect_timeout cannot go
//   below 2 s and a read's budget is ~150 ms; acquire never connects on the
//   caller's thread. After a failed connect the pool backs off (100 ms doubling
//   to 5 s) and acquire misses at once while it does: nothing is coming.
// - An idle connection is checked before it is leased (poll() on its socket:
//   readable or hung up means the server ended it, e.g. after a restart).
// - A lease is armed: once older than statement_timeout + grace, a watchdog
//   thread shuts its socket down (shutdown(2)), so a read blocked on a stopped
//   backend or a dead network path fails with pqxx::broken_connection instead
//   of hanging until TCP gives up. statement_timeout alone cannot end it: a
//   stopped backend runs no timer and a lost path delivers no error.
// - A lease given back after an error, a watchdog shutdown, or with an open
//   transaction block is closed, never reused: the standby keeps no
//   idle-in-transaction session of ours.
//
// Lessees use conn() only on the thread that holds the lease, run one routed
// read per lease, change no session setting (SET LOCAL is fine), and never
// call disconnect()/deactivate() on it.
//
// A lease must not outlive its pool: the pool's destructor joins its threads
// and closes every idle connection; a lease still out then is no longer
// watched. (It stays memory-safe: a lease keeps the pool's shared state alive
// and, given back after the pool is gone, just closes its connection.)

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include <pqxx/connection>

#include "db/prepared_reads.hpp"
#include "db/session.hpp"

namespace waggle::db {

struct replica_pool_options {
  std::string url;                 // libpq URL or conninfo of one reader; never logged
  std::string name;                // "reader-0": logs and metric labels
  size_t max_connections = 4;      // 0 is taken as 1
  std::chrono::milliseconds statement_timeout{5000};  // SET statement_timeout on every new connection; 0: none, and no watchdog
  std::chrono::milliseconds watchdog_grace{150};      // a lease older than statement_timeout + grace gets its socket shut down
  session_reporter report;         // connect_failed / reconnected / connection_lost, for the owner's logs
};

struct replica_pool_counters {     // atomics, read by the metrics renderer
  std::atomic<uint64_t> acquire_attempts{0}, acquire_timeouts{0}, connects{0}, connect_failures{0},
    discarded{0}, watchdog_fired{0};
  std::atomic<int64_t> open{0}, idle{0}, active{0};  // open = idle + active, kept exact
};

namespace detail {
struct replica_slot;
struct replica_pool_state;
}  // namespace detail

class replica_pool {
 public:
  explicit replica_pool(replica_pool_options o);  // lazy: opens nothing, never blocks, never throws on a bad/down reader
  ~replica_pool();                                 // joins its threads, closes the idle connections
  replica_pool(const replica_pool&) = delete;
  replica_pool& operator=(const replica_pool&) = delete;

  class lease {  // move-only; the destructor gives the connection back (or discards it)
   public:
    lease(lease&& other) noexcept;
    lease& operator=(lease&& other) noexcept;
    ~lease();

    pqxx::connection& conn();
    prepared_reads& prepared();          // this connection's prepared statements
    const std::string& backend() const;  // "addr:port pid=N" ("local:port pid=N" on a Unix socket), read once at connect
    int backend_pid() const;             // pg_backend_pid() of the same session
    // After any error: the connection is closed now, not reused; the lease is
    // empty afterwards (conn() throws std::logic_error).
    void discard();
    explicit operator bool() const { return slot_ != nullptr; }

   private:
    friend class replica_pool;
    lease(std::shared_ptr<detail::replica_pool_state> state, std::unique_ptr<detail::replica_slot> slot);
    void give_back(bool discard) noexcept;

    std::shared_ptr<detail::replica_pool_state> state_;
    std::unique_ptr<detail::replica_slot> slot_;
  };

  // ONE attempt: counts acquire_attempts once; waits at most `budget` for a
  // usable connection (asking the connector for one when below max); nullopt
  // = miss (counts acquire_timeouts). While the reader is failing, misses at
  // once during the backoff and while another call's probe connect is in
  // flight; the first call after the backoff probes and waits within its
  // budget. The lease is armed from here until it is given back (see above).
  std::optional<lease> acquire(std::chrono::milliseconds budget);

  const replica_pool_counters& counters() const;
  const std::string& name() const;
  size_t max_connections() const;

 private:
  std::shared_ptr<detail::replica_pool_state> state_;
  std::thread connector_;
  std::thread watchdog_;
};

}  // namespace waggle::db
