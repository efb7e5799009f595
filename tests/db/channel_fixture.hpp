#pragma once

// Events for the channel tests (tests/db/channel_*_test.cpp): signed NIP-29
// commands and channel posts by the test signers of pg_fixture.hpp.

#include <atomic>
#include <chrono>
#include <thread>
#include <ctime>
#include <string>
#include <vector>

#include "messages/proto/nip29.hpp"
#include "tests/support/pg_fixture.hpp"

namespace waggle::pgtest {

inline std::string pk(int n) { return proto::pubkey_of(secret(n)); }

// A fresh created_at for every event, so no two commands share an id (and
// all stay inside the relay's created_at window).
inline int64_t fresh_time() {
  static std::atomic<int64_t> n{0};
  return static_cast<int64_t>(std::time(nullptr)) - 100000 + n++;
}

inline proto::event command(int signer, int32_t kind, std::vector<proto::tag> tags) {
  return make_event(signer, kind, fresh_time(), std::move(tags));
}

inline proto::event post(int author, const std::string& channel, const std::string& text) {
  return make_event(author, 9, fresh_time(), {{"h", channel}}, text);
}

// The locktype backend `pid` waits for ("" when it waits for none).
inline std::string awaited_locktype(pqxx::connection& observer, int pid) {
  pqxx::nontransaction tx(observer);
  auto r = tx.exec_params("SELECT locktype FROM pg_locks WHERE pid = $1 AND NOT granted LIMIT 1", pid);
  return r.empty() ? std::string() : r[0][0].as<std::string>();
}

// Polls until backend `pid` waits for a lock (returns its locktype) or its
// worker has finished (returns "finished"); "" after `timeout`, a failure
// detector only, never what a test asserts on.
inline std::string wait_for_locktype(pqxx::connection& observer, int pid,
                                     const std::atomic<bool>& finished,
                                     std::chrono::milliseconds timeout = std::chrono::seconds(30)) {
  auto until = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < until) {
    if (auto t = awaited_locktype(observer, pid); !t.empty())
      return t;
    if (finished)
      return "finished";
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return "";
}

}  // namespace waggle::pgtest
