#include "actors/db_session.hpp"

#include <algorithm>

#include <pqxx/nontransaction>

#include "actors/log.hpp"

namespace waggle {

namespace {
constexpr auto min_backoff = std::chrono::milliseconds(100);
constexpr auto max_backoff = std::chrono::milliseconds(5000);
}  // namespace

db_session::db_session(std::string url, std::string role, std::vector<std::string> setup)
  : url_(std::move(url)), setup_(std::move(setup)), role_(std::move(role)) {
}

pqxx::connection* db_session::get() {
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
      log::info("db", "reconnected", {{"session", role_}});
    backoff_ = std::chrono::milliseconds(0);
    return conn_.get();
  } catch (const std::exception& e) {
    backoff_ = std::clamp(backoff_ * 2, min_backoff, max_backoff);
    next_attempt_ = now + backoff_;
    // libpq's message names host and port, never the password.
    log::warn("db", "connect failed",
              {{"session", role_}, {"retry_ms", std::to_string(backoff_.count())},
               {"error", e.what()}});
    return nullptr;
  }
}

void db_session::reset() {
  conn_.reset();
  backoff_ = std::clamp(backoff_ * 2, min_backoff, max_backoff);
  next_attempt_ = clock::now() + backoff_;
  log::warn("db", "connection lost", {{"session", role_}});
}

}  // namespace waggle
