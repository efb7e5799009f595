#include "db/listen_connection.hpp"

#include <algorithm>

#include <pqxx/except>
#include <pqxx/nontransaction>
#include <pqxx/notification>
#include <pqxx/result>

namespace waggle::db {

class listen_connection::receiver : public pqxx::notification_receiver {
 public:
  receiver(pqxx::connection& c, const std::string& channel, std::vector<notification>& into)
    : pqxx::notification_receiver(c, channel), into_(into) {}
  void operator()(const std::string& payload, int) override {
    into_.push_back({channel(), payload});
  }

 private:
  std::vector<notification>& into_;
};

listen_connection::listen_connection(std::string url, std::vector<std::string> channels)
  : url_(std::move(url)), channels_(std::move(channels)) {}

listen_connection::~listen_connection() {
  reset();
}

bool listen_connection::connect(std::string& error) {
  reset();
  try {
    conn_ = std::make_unique<pqxx::connection>(url_);
    // A reconnect libpqxx made by itself would re-LISTEN unseen, and the
    // owner would never fetch what the gap's notifications would have
    // announced: a broken connection throws instead, and the owner
    // reconnects through connect(), which it follows with a catch-up.
    conn_->inhibit_reactivation(true);
    // A receiver's constructor issues the LISTEN (libpqxx 6).
    for (const auto& ch : channels_)
      receivers_.push_back(std::make_unique<receiver>(*conn_, ch, arrived_));
    return true;
  } catch (const std::exception& e) {
    error = e.what();
    reset();
    return false;
  }
}

void listen_connection::reset() {
  // Receivers unregister from their connection: drop them first.
  receivers_.clear();
  conn_.reset();
  arrived_.clear();
}

int listen_connection::backend_pid() const {
  return conn_ ? conn_->backendpid() : 0;
}

std::vector<notification> listen_connection::wait(std::chrono::milliseconds timeout) {
  if (!conn_)
    throw pqxx::broken_connection("not connected");
  if (conn_->get_notifs() == 0 && timeout.count() > 0) {
    const auto us = std::chrono::duration_cast<std::chrono::microseconds>(timeout).count();
    conn_->await_notification(static_cast<long>(us / 1000000), static_cast<long>(us % 1000000));
    conn_->get_notifs();
  }
  // A dead socket does not always show in get_notifs: is_open() is cheap.
  if (!conn_->is_open())
    throw pqxx::broken_connection("listen connection closed");
  return std::exchange(arrived_, {});
}

void listen_connection::set_channels(std::vector<std::string> wanted) {
  channels_ = std::move(wanted);
  if (!conn_)
    return;
  // A receiver's destructor UNLISTENs its channel (libpqxx 6).
  std::vector<std::unique_ptr<receiver>> kept;
  for (auto& r : receivers_)
    if (std::find(channels_.begin(), channels_.end(), r->channel()) != channels_.end())
      kept.push_back(std::move(r));
  receivers_.clear();  // the dropped ones, unlistening
  for (const auto& ch : channels_) {
    bool have = std::any_of(kept.begin(), kept.end(),
                            [&](const auto& r) { return r->channel() == ch; });
    if (!have)
      kept.push_back(std::make_unique<receiver>(*conn_, ch, arrived_));
  }
  receivers_ = std::move(kept);
}

std::vector<std::string> listen_connection::listening() {
  if (!conn_)
    throw pqxx::broken_connection("not connected");
  pqxx::nontransaction tx(*conn_);
  std::vector<std::string> out;
  for (const auto& row : tx.exec("SELECT pg_listening_channels() ORDER BY 1"))
    out.push_back(row[0].c_str());
  return out;
}

void notify(pqxx::connection& conn, const std::string& channel, const std::string& payload) {
  pqxx::nontransaction tx(conn);
  tx.exec_params("SELECT pg_notify($1, $2)", channel, payload);
}

}  // namespace waggle::db
