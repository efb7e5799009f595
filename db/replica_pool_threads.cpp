// db::replica_pool's connector and watchdog threads, and how a connection is
// opened (db/replica_pool.hpp says why each exists).

#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <memory>
#include <stdexcept>

#include <libpq-fe.h>
#include <pqxx/nontransaction>

#include "db/replica_pool_state.hpp"

namespace waggle::db {

namespace {

constexpr auto min_backoff = std::chrono::milliseconds(100);
constexpr auto max_backoff = std::chrono::milliseconds(5000);

}  // namespace

namespace detail {

replica_slot::~replica_slot() {
  conn.reset();  // PQfinish first: libpq's descriptor goes, the socket stays until ours does
  if (watch_fd >= 0)
    ::close(watch_fd);
}

namespace {

std::unique_ptr<replica_slot> open_slot(replica_pool_state& s) {
  if (s.conninfo.empty())
    throw std::invalid_argument("the reader's connection string does not parse");
  auto slot = std::make_unique<replica_slot>();
  slot->conn = std::make_unique<pqxx::connection>(s.conninfo);
  // A broken connection stays broken: libpqxx would otherwise reconnect on a
  // retried statement, without our session settings and on a new socket.
  slot->conn->inhibit_reactivation(true);
  slot->watch_fd = ::fcntl(slot->conn->sock(), F_DUPFD_CLOEXEC, 3);
  if (slot->watch_fd < 0)
    throw std::runtime_error("cannot watch the reader's socket (fcntl F_DUPFD)");
  // One round trip: the session settings, then who serves us.
  pqxx::nontransaction tx(*slot->conn);
  auto r = tx.exec(
    "SET statement_timeout = " + std::to_string(s.opts.statement_timeout.count()) +
    "; SET default_transaction_read_only = on"
    "; SELECT coalesce(host(inet_server_addr()), 'local') || ':' ||"
    " coalesce(inet_server_port(), current_setting('port')::int) || ' pid=' || pg_backend_pid(),"
    " pg_backend_pid()");
  slot->backend = r[0][0].as<std::string>();
  slot->backend_pid = r[0][1].as<int>();
  return slot;
}

}  // namespace

void run_connector(replica_pool_state& s) {
  std::unique_lock lk(s.m);
  for (;;) {
    s.demand.wait(lk, [&] { return s.stopping || s.wanted > 0; });
    if (s.stopping)
      return;
    if (s.failing && pool_clock::now() < s.next_attempt) {
      // acquire asks for no connect during backoff; this keeps it so anyway.
      s.demand.wait_until(lk, s.next_attempt, [&] { return s.stopping; });
      continue;
    }
    lk.unlock();
    std::unique_ptr<replica_slot> slot;
    std::string error;
    try {
      slot = open_slot(s);
    } catch (const std::exception& e) {
      error = e.what();  // libpq's text names host and port, never the password
      slot.reset();
    }
    lk.lock();
    if (slot) {
      bool recovered = s.failing;
      s.failing = false;
      s.backoff = std::chrono::milliseconds(0);
      s.counters.connects++;
      if (s.wanted > 0)
        --s.wanted;
      // Reported before the session is handed out (and each failure before
      // its waiters give up): whoever gets the session, or the miss, finds
      // the report already made. Reported after, a test that acquired and
      // then read the reports saw the old state, once.
      if (recovered) {
        lk.unlock();
        s.report({session_report::reconnected, s.opts.name, {}, {}});
        lk.lock();
      }
      if (s.stopping) {
        lk.unlock();
        return;  // `slot` closes
      }
      s.idle.push_back(std::move(slot));
      s.counters.open++;
      s.counters.idle++;
      lk.unlock();
      s.available.notify_all();
    } else {
      s.counters.connect_failures++;
      s.failing = true;
      s.backoff = std::clamp(s.backoff * 2, min_backoff, max_backoff);
      s.next_attempt = pool_clock::now() + s.backoff;
      // Waiters give up at once; later demand waits for the backoff to expire.
      s.wanted = 0;
      auto retry = s.backoff;
      lk.unlock();
      s.report({session_report::connect_failed, s.opts.name, retry, error});
      s.available.notify_all();
    }
    lk.lock();
  }
}

void run_watchdog(replica_pool_state& s) {
  std::unique_lock lk(s.m);
  while (!s.stopping) {
    auto now = pool_clock::now();
    auto next = pool_clock::time_point::max();
    size_t fired = 0;
    for (auto* slot : s.armed) {
      if (slot->fired)
        continue;
      if (now >= slot->deadline) {
        // Counted before the shutdown: the reader wakes the moment the socket
        // is shut and must find its read counted (counted after, a reader
        // that checked at once saw 0 — a test failed on that, once).
        slot->fired = true;
        s.counters.watchdog_fired++;
        // shutdown, never close: the descriptor libpq blocks on stays libpq's;
        // its read returns EOF and libpqxx throws broken_connection.
        ::shutdown(slot->watch_fd, SHUT_RDWR);
        ++fired;
      } else {
        next = std::min(next, slot->deadline);
      }
    }
    if (fired > 0) {
      lk.unlock();
      for (size_t i = 0; i < fired; ++i)
        s.report({session_report::connection_lost, s.opts.name, {},
                  "a read outlived statement_timeout + grace; its socket was shut down"});
      lk.lock();
      continue;  // the list may have changed meanwhile
    }
    // Leases are armed with a fixed timeout, so a new one never expires before
    // an existing one: only a watchdog with nothing armed needs waking.
    s.watchdog_sleeping = next == pool_clock::time_point::max();
    if (s.watchdog_sleeping)
      s.watch.wait(lk);
    else
      s.watch.wait_until(lk, next);
    s.watchdog_sleeping = false;
  }
}

}  // namespace detail
}  // namespace waggle::db
