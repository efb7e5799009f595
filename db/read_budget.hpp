#pragma once

// The time one read (a REQ's history, a COUNT, an access check) may spend in
// the database, across all its statements. PostgreSQL's statement_timeout is
// per statement: a REQ of 10 filters runs 10 of them, so the session value
// alone let one read take 10 times it, past its caller's --read-timeout-ms.
// Before each statement the budget gives it what is left of the read's time
// (through set_config), and a read with nothing left is ended before its next
// statement (docs/protocol.md, "Read limits"). Inside a transaction the value
// is SET LOCAL and ends with it. The reader sessions run their statements
// outside one (pqxx::nontransaction: a read's statements each see their own
// snapshot under READ COMMITTED anyway, and BEGIN and COMMIT were two of every
// three round trips), where a local value would end with the very statement
// that set it; there the budget sets the session's value and end() puts it
// back.

#include <chrono>
#include <stdexcept>

#include <pqxx/connection_base>
#include <pqxx/transaction_base>

namespace waggle::db {

// Thrown before a statement when the read has no time left; the reader
// answers it as it answers a statement cancelled by statement_timeout.
struct read_budget_spent : std::runtime_error {
  read_budget_spent() : std::runtime_error("read time budget spent") {}
};

class read_budget {
 public:
  using clock = std::chrono::steady_clock;

  // `total` must be the session's own statement_timeout (the reader sessions
  // set both from --read-statement-timeout-ms): a statement the budget does
  // not arm runs under it. 0 = no budget.
  explicit read_budget(std::chrono::milliseconds total, clock::time_point start = clock::now());

  // Call before each statement of the read, on the transaction it runs in.
  // Throws read_budget_spent when nothing is left. `ceiling` (0 = none): the
  // statement runs at most that long even when the budget has more left (a
  // search's own bound); armed at once, slack or not.
  void before_statement(pqxx::transaction_base& tx,
                        std::chrono::milliseconds ceiling = std::chrono::milliseconds{0});

  // Call once the read is over, whatever its outcome (outside any
  // transaction): if a statement outside a transaction changed the session's
  // statement_timeout, it is `total` again, as the session's own value must
  // be. One round trip, and only for a read that ran past the slack.
  void end(pqxx::connection_base& conn);
  bool changed_session() const { return changed_session_; }

  std::chrono::milliseconds remaining(clock::time_point now = clock::now()) const;

  // The whole budget again from `now`: a read a replica failed mid-way runs
  // again on the writer (docs/replicas.md), and its answer must not be lost
  // to the time the replica took.
  void restart(clock::time_point now = clock::now()) { start_ = now; }

 private:
  std::chrono::milliseconds total_;
  clock::time_point start_;
  // Until this much of the budget is used, statements run under the session
  // value without a set_config round trip: a fast read (nearly all of them)
  // pays nothing, and a read overruns its budget by at most this.
  std::chrono::milliseconds slack_;
  bool changed_session_ = false;
};

// For the read paths' optional budget.
inline void before_statement(read_budget* budget, pqxx::transaction_base& tx,
                             std::chrono::milliseconds ceiling = std::chrono::milliseconds{0}) {
  if (budget)
    budget->before_statement(tx, ceiling);
}

}  // namespace waggle::db
