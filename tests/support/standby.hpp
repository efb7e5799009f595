#pragma once

// The streaming standby of the test cluster (docs/testing.md, "The standby"), for replica
// tests: ./scripts/test starts it (pg_basebackup -R of the primary, its own port) and exports
// WAGGLE_TEST_STANDBY_URL, its maintenance database, shaped like WAGGLE_TEST_DATABASE_URL.
// Missing or unreachable is a test FAILURE, never a skip.
//
// Every call returns a ::testing::AssertionResult: ASSERT_TRUE(standby::pause_replay()) fails
// the test with the reason (LSNs, replay state, the script's output). Waits poll a condition
// against a deadline; the deadlines are failure detectors, not timing claims.
//
// The standby is shared by every test of the run, so tests that use it (files named
// replica_*_test.cpp or standby_*_test.cpp) hold the ctest RESOURCE_LOCK `waggle_standby` and
// never run at the same time. A test that pauses or stops it puts it back with
// `restore_on_exit`; make_healthy() in SetUp repairs what a crashed test left behind.

#include <chrono>
#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace waggle::standby {

using namespace std::chrono_literals;

// WAGGLE_TEST_STANDBY_URL, "" when unset.
std::string maintenance_url();
// WAGGLE_TEST_DATABASE_URL (the primary's maintenance database), "" when unset.
std::string primary_url();
// Success when both URLs are set, the standby answers, is in recovery and copies the primary
// of WAGGLE_TEST_DATABASE_URL (same system identifier). The first assertion of every test.
::testing::AssertionResult configured();

// The standby URL of database `db` (the maintenance URL with its database swapped).
std::string url_for(const std::string& db);
// TCP port of the standby and of the primary, from their URLs (0 when not in the URL).
int port();
int primary_port();

// Whether the standby accepts connections now, and whether its WAL receiver streams.
bool accepts_connections();
bool streaming();
// pg_get_wal_replay_pause_state(): "not paused", "pause requested", "paused" ("" when down).
std::string replay_state();

// pg_wal_replay_pause() and wait until the state is "paused" (replay really stopped).
::testing::AssertionResult pause_replay(std::chrono::milliseconds timeout = 10s);
// pg_wal_replay_resume() and wait until the state is "not paused".
::testing::AssertionResult resume_replay(std::chrono::milliseconds timeout = 10s);

// Waits until the standby has replayed everything the primary (`primary`: any database of
// it) wrote before this call: pg_last_wal_replay_lsn() >= the primary's pg_current_wal_lsn().
::testing::AssertionResult wait_replayed(const std::string& primary = primary_url(),
                                         std::chrono::milliseconds timeout = 30s);
// Waits until the standby has RECEIVED that WAL (pg_last_wal_receive_lsn()): with replay
// paused, proof that a row is on the standby's disk but not visible there.
::testing::AssertionResult wait_received(const std::string& primary = primary_url(),
                                         std::chrono::milliseconds timeout = 30s);

// `./scripts/pg stop standby` / `./scripts/pg start standby`, run from the source tree with
// the ports of the two URLs. stop waits until the standby refuses connections; start until it
// accepts them and streams from the primary.
::testing::AssertionResult stop_standby();
::testing::AssertionResult start_standby(std::chrono::milliseconds timeout = 60s);

// Started, streaming, replay not paused: what a test may assume at its start.
::testing::AssertionResult make_healthy();

// Puts the standby back (make_healthy) when it goes out of scope, whatever the test did;
// a failure to do so fails the test.
struct restore_on_exit {
  restore_on_exit() = default;
  restore_on_exit(const restore_on_exit&) = delete;
  restore_on_exit& operator=(const restore_on_exit&) = delete;
  ~restore_on_exit();
};

// Client backends on the standby connected to database `db` (not the caller's own).
std::vector<int> backend_pids(const std::string& db);

// SIGSTOP / SIGCONT of one standby backend (a blackholed reader: its socket stays open and
// nothing answers). Waits until /proc shows it stopped (T) or running again.
::testing::AssertionResult stop_backend(int pid, std::chrono::milliseconds timeout = 5s);
::testing::AssertionResult continue_backend(int pid, std::chrono::milliseconds timeout = 5s);

// A SIGSTOPped backend that gets SIGCONT when this goes out of scope.
class stopped_backend {
 public:
  explicit stopped_backend(int pid);
  ~stopped_backend();
  stopped_backend(const stopped_backend&) = delete;
  stopped_backend& operator=(const stopped_backend&) = delete;
  const ::testing::AssertionResult& stopped() const { return stopped_; }

 private:
  int pid_;
  ::testing::AssertionResult stopped_;
};

}  // namespace waggle::standby
