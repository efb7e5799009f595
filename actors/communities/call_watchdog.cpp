#include "actors/communities/call_watchdog.hpp"

namespace waggle {

call_watchdog::call_watchdog() : thread_([this] { run(); }) {}

call_watchdog::~call_watchdog() {
  {
    std::lock_guard guard{mtx_};
    stop_ = true;
  }
  cv_.notify_one();
  thread_.join();
}

void call_watchdog::arm(pqxx::connection_base& conn, clock::time_point at) {
  {
    std::lock_guard guard{mtx_};
    conn_ = &conn;
    at_ = at;
    fired_ = false;
  }
  cv_.notify_one();
}

bool call_watchdog::disarm() {
  std::lock_guard guard{mtx_};
  conn_ = nullptr;
  return !fired_;
}

void call_watchdog::run() {
  std::unique_lock lock{mtx_};
  while (!stop_) {
    if (!conn_) {
      cv_.wait(lock);
      continue;
    }
    auto at = at_;
    if (cv_.wait_until(lock, at) == std::cv_status::no_timeout)
      continue;  // disarmed, re-armed or stopping: look again
    if (!conn_ || at_ != at)
      continue;
    // Under the lock: disarm() cannot slip between the check and the cancel,
    // so a commit that follows a disarm is never the statement cancelled.
    try {
      conn_->cancel_query();
    } catch (const std::exception&) {
      // No connection to cancel on: the call's own statement fails anyway.
    }
    fired_ = true;
    conn_ = nullptr;
  }
}

}  // namespace waggle
