#include "db/read_budget.hpp"

#include <algorithm>
#include <string>

#include <pqxx/nontransaction>

namespace waggle::db {

read_budget::read_budget(std::chrono::milliseconds total, clock::time_point start)
  : total_(total), start_(start),
    slack_(std::min(total / 20, std::chrono::milliseconds(50))) {}

std::chrono::milliseconds read_budget::remaining(clock::time_point now) const {
  return total_ - std::chrono::duration_cast<std::chrono::milliseconds>(now - start_);
}

void read_budget::before_statement(pqxx::transaction_base& tx,
                                   std::chrono::milliseconds ceiling) {
  if (total_.count() <= 0)
    return;
  auto now = clock::now();
  auto left = remaining(now);
  if (left.count() <= 0)
    throw read_budget_spent{};
  const bool capped = ceiling.count() > 0 && ceiling < left;
  if (capped)
    left = ceiling;
  // Once past the slack, every later statement is armed (a local value
  // lasts only for its transaction, and a read runs several). So is every
  // statement after a ceiling changed the session's value: it would
  // otherwise run under the ceiling.
  if (!capped && !changed_session_ && now - start_ <= slack_)
    return;
  // At least 1: 0 would mean no timeout at all.
  auto ms = std::max<int64_t>(1, left.count());
  // Autocommit: each statement is its own transaction, so only a session
  // value reaches the next one (and end() takes it back).
  const bool local = dynamic_cast<pqxx::nontransaction*>(&tx) == nullptr;
  tx.exec("SELECT set_config('statement_timeout', '" + std::to_string(ms) + "', " +
          (local ? "true" : "false") + ")");
  if (!local)
    changed_session_ = true;
}

void read_budget::end(pqxx::connection_base& conn) {
  if (!changed_session_)
    return;
  pqxx::nontransaction tx(conn);
  tx.exec("SET statement_timeout = " + std::to_string(total_.count()));
  changed_session_ = false;
}

}  // namespace waggle::db
