#include "db/session.hpp"

#include <algorithm>

#include <pqxx/nontransaction>

namespace waggle::db {

namespace {
constexpr auto min_backoff = std::chrono::milliseconds(100);
constexpr auto max_backoff = std::chrono::milliseconds(5000);
}  // namespace

session::session(std::string url, std::string role, std::vector<std::string> setup,
                 session_reporter report)
  : url_(std::move(url)), setup_(std::move(setup)), role_(std::move(role)),
    report_(std::move(report)) {}

void session::report(session_report r) const {
  if (report_)
    report_(r);
}

pqxx::connection* session::get() {
  if (conn_ && conn_->is_open())
    return conn_.get();
  conn_.reset();
  auto now = clock::now();
  if (now < next_attempt_)
    return nullptr;
  try {
    conn_ = std::make_unique<pqxx::connection>(url_);
    for (auto& statement : setup_)
      pqxx::nontransaction{*conn_}.exec(statement);
    if (backoff_.count() > 0)
      report({session_report::reconnected, role_, {}, {}});
    backoff_ = std::chrono::milliseconds(0);
    return conn_.get();
  } catch (const std::exception& e) {
    backoff_ = std::clamp(backoff_ * 2, min_backoff, max_backoff);
    next_attempt_ = now + backoff_;
    report({session_report::connect_failed, role_, backoff_, e.what()});
    return nullptr;
  }
}

void session::reset() {
  conn_.reset();
  backoff_ = std::clamp(backoff_ * 2, min_backoff, max_backoff);
  next_attempt_ = clock::now() + backoff_;
  report({session_report::connection_lost, role_, {}, {}});
}

}  // namespace waggle::db
