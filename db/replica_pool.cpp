#include "db/replica_pool.hpp"

#include <poll.h>

#include <algorithm>
#include <cerrno>
#include <stdexcept>

#include <libpq-fe.h>

#include "db/conninfo.hpp"
#include "db/replica_pool_state.hpp"

namespace waggle::db {

namespace {

using detail::pool_clock;
using detail::replica_pool_state;
using detail::replica_slot;

// libpqxx 6 does not expose its PGconn, and whether the server has a
// transaction block open is only known to libpq (PQtransactionStatus): a
// lessee may have sent BEGIN as plain SQL, so libpqxx's own bookkeeping does
// not say. The member is reached through an explicit instantiation, the one
// place C++ lets a name bypass access checks.
static_assert(PQXX_VERSION_MAJOR == 6, "replica_pool reads libpqxx 6's connection_base::m_conn");
struct pgconn_member {
  using type = pqxx::internal::pq::PGconn* pqxx::connection_base::*;
  friend type member_of(pgconn_member);
};
template <typename Tag, typename Tag::type Member>
struct expose_member {
  friend typename Tag::type member_of(Tag) { return Member; }
};
template struct expose_member<pgconn_member, &pqxx::connection_base::m_conn>;

PGconn* raw(pqxx::connection_base& c) { return c.*member_of(pgconn_member{}); }

// A connection that can go back to idle: open, and no transaction block (nor
// command) in progress on the server.
bool reusable(pqxx::connection& c) {
  PGconn* pg = raw(c);
  return pg && c.is_open() && PQstatus(pg) == CONNECTION_OK &&
         PQtransactionStatus(pg) == PQTRANS_IDLE;
}

// An idle connection has nothing to say: a readable or hung-up socket means
// the server ended the session (terminated, restarted, failed over).
bool quiet(const replica_slot& slot) {
  pollfd p{slot.watch_fd, POLLIN | POLLRDHUP, 0};
  int n;
  do
    n = ::poll(&p, 1, 0);
  while (n < 0 && errno == EINTR);
  return n == 0;
}

}  // namespace

replica_pool::replica_pool(replica_pool_options o) : state_(std::make_shared<replica_pool_state>()) {
  auto& s = *state_;
  s.opts = std::move(o);
  s.opts.max_connections = std::max<size_t>(s.opts.max_connections, 1);
  try {
    auto unacked = s.opts.statement_timeout.count() > 0 ? s.opts.statement_timeout + s.opts.watchdog_grace
                                                        : std::chrono::milliseconds(0);
    s.conninfo = guarded_conninfo(s.opts.url, s.opts.name, unacked);
  } catch (const std::invalid_argument&) {
    // Left empty: every connect fails (and backs off) with that reason, and the
    // owner hears it through `report`, like any other unreachable reader.
  }
  connector_ = std::thread([st = state_] { detail::run_connector(*st); });
  watchdog_ = std::thread([st = state_] { detail::run_watchdog(*st); });
}

replica_pool::~replica_pool() {
  auto& s = *state_;
  std::vector<std::unique_ptr<replica_slot>> idle;
  {
    std::lock_guard lk(s.m);
    s.stopping = true;
    idle.swap(s.idle);
    s.counters.open -= static_cast<int64_t>(idle.size());
    s.counters.idle = 0;
  }
  s.demand.notify_all();
  s.watch.notify_all();
  s.available.notify_all();
  // A connect in progress ends within connect_timeout (2 s per address).
  connector_.join();
  watchdog_.join();
  idle.clear();
}

std::optional<replica_pool::lease> replica_pool::acquire(std::chrono::milliseconds budget) {
  auto& s = *state_;
  s.counters.acquire_attempts++;
  const auto deadline = pool_clock::now() + budget;
  std::vector<std::unique_ptr<replica_slot>> dead;
  std::optional<lease> out;
  {
    std::unique_lock lk(s.m);
    const auto failures_before = s.counters.connect_failures.load();
    bool probing = false;  // this call asked for the connect that tests a failing reader
    bool asked = false;
    while (!s.stopping) {
      while (!s.idle.empty()) {
        auto slot = std::move(s.idle.back());
        s.idle.pop_back();
        s.counters.idle--;
        if (!quiet(*slot)) {
          s.counters.open--;
          s.counters.discarded++;
          dead.push_back(std::move(slot));
          continue;
        }
        slot->deadline = s.opts.statement_timeout.count() > 0
                           ? pool_clock::now() + s.opts.statement_timeout + s.opts.watchdog_grace
                           : pool_clock::time_point::max();  // no timeout: nothing to enforce
        slot->fired = false;
        s.armed.push_back(slot.get());
        s.counters.active++;
        if (s.watchdog_sleeping)
          s.watch.notify_one();
        out = lease(state_, std::move(slot));
        break;
      }
      if (out)
        break;
      auto now = pool_clock::now();
      if (s.failing) {
        // The reader is down. Nothing is coming while the connector backs off
        // or while another call's probe is in flight (against a blackholed
        // reader that takes connect_timeout): miss at once. Once the backoff
        // expires, this call probes and waits for it within its budget.
        if (probing) {
          if (s.counters.connect_failures.load() != failures_before)
            break;
        } else if (now < s.next_attempt || s.wanted > 0) {
          break;
        } else {
          probing = true;
          ++s.wanted;
          s.demand.notify_one();
        }
      } else if (s.open_locked() + s.wanted < s.opts.max_connections && (!asked || s.wanted == 0)) {
        // Asked again only once the earlier connect landed (and someone else
        // took it) or failed: one call is one connection's worth of demand.
        asked = true;
        ++s.wanted;
        s.demand.notify_one();
      }
      if (now >= deadline)
        break;
      s.available.wait_until(lk, deadline);
    }
  }
  if (!out)
    s.counters.acquire_timeouts++;
  if (!dead.empty()) {
    auto n = dead.size();
    dead.clear();  // PQfinish outside the lock
    for (size_t i = 0; i < n; ++i)
      s.report({session_report::connection_lost, s.opts.name, {},
                "an idle connection was closed by the server"});
  }
  return out;
}

const replica_pool_counters& replica_pool::counters() const { return state_->counters; }
const std::string& replica_pool::name() const { return state_->opts.name; }
size_t replica_pool::max_connections() const { return state_->opts.max_connections; }

// ---- lease ------------------------------------------------------------------------

replica_pool::lease::lease(std::shared_ptr<replica_pool_state> state, std::unique_ptr<replica_slot> slot)
  : state_(std::move(state)), slot_(std::move(slot)) {}

replica_pool::lease::lease(lease&& other) noexcept = default;

replica_pool::lease& replica_pool::lease::operator=(lease&& other) noexcept {
  if (this != &other) {
    give_back(false);
    state_ = std::move(other.state_);
    slot_ = std::move(other.slot_);
  }
  return *this;
}

replica_pool::lease::~lease() { give_back(false); }

pqxx::connection& replica_pool::lease::conn() {
  if (!slot_)
    throw std::logic_error("replica_pool::lease: used after discard or move");
  return *slot_->conn;
}

prepared_reads& replica_pool::lease::prepared() {
  if (!slot_)
    throw std::logic_error("replica_pool::lease: used after discard or move");
  return slot_->prepared;
}

const std::string& replica_pool::lease::backend() const {
  static const std::string none;
  return slot_ ? slot_->backend : none;
}

int replica_pool::lease::backend_pid() const { return slot_ ? slot_->backend_pid : 0; }

void replica_pool::lease::discard() { give_back(true); }

void replica_pool::lease::give_back(bool discard) noexcept {
  if (!slot_)
    return;
  auto& s = *state_;
  bool fired;
  {
    // Disarmed first: from here the watchdog no longer looks at this slot.
    std::lock_guard lk(s.m);
    s.armed.erase(std::find(s.armed.begin(), s.armed.end(), slot_.get()));
    fired = slot_->fired;
  }
  // A connection the watchdog shut down is dead whatever libpq believes yet.
  bool reuse = !discard && !fired && reusable(*slot_->conn);
  {
    std::lock_guard lk(s.m);
    s.counters.active--;
    if (reuse && !s.stopping) {
      s.idle.push_back(std::move(slot_));
      s.counters.idle++;
    } else {
      s.counters.open--;
      s.counters.discarded++;
    }
  }
  s.available.notify_all();
  slot_.reset();  // closes a discarded connection, outside the lock
}

}  // namespace waggle::db
