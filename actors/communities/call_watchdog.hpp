#pragma once

// Ends a management call's statement when the call's deadline passes
// (docs/management.md). A lock_timeout or statement_timeout bounds one
// statement; a call runs several, each of which could wait nearly the whole
// time. So the worker arms this before its first statement and disarms it
// before it commits: if the deadline comes first, the watchdog's thread
// cancels the running statement (libpq's cancel request, made for another
// thread), the call's transaction fails and is rolled back, and the worker
// answers 504. A cancel is never sent once disarmed: the commit is not
// cancelled by it.

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>

#include <pqxx/connection>

namespace waggle {

class call_watchdog {
 public:
  using clock = std::chrono::steady_clock;

  call_watchdog();
  ~call_watchdog();
  call_watchdog(const call_watchdog&) = delete;
  call_watchdog& operator=(const call_watchdog&) = delete;

  void arm(pqxx::connection_base& conn, clock::time_point at);
  // False when it fired: the call's statement was (or is being) cancelled.
  bool disarm();

 private:
  void run();
  std::mutex mtx_;
  std::condition_variable cv_;
  pqxx::connection_base* conn_ = nullptr;  // armed when set
  clock::time_point at_{};
  bool fired_ = false;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace waggle
