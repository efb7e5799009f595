#include "db/listen_connection.hpp"

#include <pqxx/except>
#include <pqxx/nontransaction>
#include <pqxx/notification>

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

void notify(pqxx::connection& conn, const std::string& channel, const std::string& payload) {
  pqxx::nontransaction tx(conn);
  tx.exec_params("SELECT pg_notify($1, $2)", channel, payload);
}

}  // namespace waggle::db
