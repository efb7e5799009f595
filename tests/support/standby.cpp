#include "tests/support/standby.hpp"

#include <signal.h>
#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <optional>
#include <thread>

#include <pqxx/pqxx>
#include "tests/support/test_paths.hpp"

namespace waggle::standby {
namespace {

using steady = std::chrono::steady_clock;

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v ? std::string(v) : std::string();
}

// The database part of a postgresql:// URL replaced (query parameters kept).
std::string with_database(const std::string& url, const std::string& db) {
  auto scheme = url.find("://");
  if (scheme == std::string::npos)
    return "dbname=" + db + " " + url;  // keyword/value form: the last dbname wins
  auto path = url.find('/', scheme + 3);
  auto query = url.find('?', scheme + 3);
  std::string head = url.substr(0, std::min(path, query));
  std::string tail = query == std::string::npos ? "" : url.substr(query);
  return head + "/" + db + tail;
}

int port_of(const std::string& url) {
  auto scheme = url.find("://");
  if (scheme == std::string::npos)
    return 0;
  auto end = url.find_first_of("/?", scheme + 3);
  auto authority = url.substr(scheme + 3, end == std::string::npos ? std::string::npos : end - scheme - 3);
  auto at = authority.rfind('@');
  auto hostport = at == std::string::npos ? authority : authority.substr(at + 1);
  auto colon = hostport.rfind(':');
  if (colon == std::string::npos)
    return 0;
  return std::atoi(hostport.c_str() + colon + 1);
}

// One statement's first column of the first row on `url`, nullopt when it cannot connect
// or the statement fails (`error` says why).
std::optional<std::string> scalar(const std::string& url, const std::string& sql,
                                  std::string* error = nullptr) {
  try {
    pqxx::connection c(url);
    pqxx::nontransaction tx(c);
    auto r = tx.exec(sql);
    if (r.empty() || r[0][0].is_null())
      return std::string();
    return r[0][0].c_str();
  } catch (const std::exception& e) {
    if (error)
      *error = e.what();
    return std::nullopt;
  }
}

// Polls `done` every 10 ms until true or the deadline.
bool poll(std::chrono::milliseconds timeout, const std::function<bool()>& done) {
  auto until = steady::now() + timeout;
  while (steady::now() < until) {
    if (done())
      return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return done();
}

std::string quoted(const std::string& s) {
  std::string out = "'";
  for (char c : s)
    out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

// ./scripts/pg VERB standby with the ports of the two URLs, so it acts on exactly the
// clusters this test reads; its exit status and everything it printed.
// Without both ports it refuses: the script's defaults could name someone else's clusters.
std::pair<int, std::string> run_script(const std::string& verb) {
  if (primary_port() == 0 || port() == 0)
    return {-1, "not running ./scripts/pg " + verb +
                  " standby: WAGGLE_TEST_DATABASE_URL and WAGGLE_TEST_STANDBY_URL must both be "
                  "postgresql://user@host:port/db URLs"};
  std::string cmd = "WAGGLE_TEST_PG_PORT=" + std::to_string(primary_port()) +
                    " WAGGLE_TEST_STANDBY_PORT=" + std::to_string(port()) + " ";
  cmd += quoted(std::string(waggle::test_paths::source_dir) + "/scripts/pg") + " " + verb + " standby 2>&1";
  std::string out;
  FILE* f = ::popen(cmd.c_str(), "r");
  if (!f)
    return {-1, "popen failed: " + cmd};
  char buf[512];
  while (size_t n = std::fread(buf, 1, sizeof buf, f))
    out.append(buf, n);
  int status = ::pclose(f);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, cmd + "\n" + out};
}

::testing::AssertionResult lsn_reached(const std::string& primary, const char* standby_fn,
                                       std::chrono::milliseconds timeout) {
  std::string error;
  auto target = scalar(primary, "SELECT pg_current_wal_lsn()::text", &error);
  if (!target)
    return ::testing::AssertionFailure() << "cannot read the primary's LSN: " << error;
  std::string last = "?";
  bool ok = poll(timeout, [&] {
    auto at = scalar(maintenance_url(), std::string("SELECT coalesce(") + standby_fn +
                                          "()::text, '?') || ' ' || (coalesce(" + standby_fn +
                                          "() >= '" + *target + "'::pg_lsn, false))::text");
    if (!at)
      return false;
    last = *at;
    return last.size() > 5 && last.compare(last.size() - 5, 5, " true") == 0;
  });
  if (ok)
    return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << "the standby's " << standby_fn << "() did not reach the primary's " << *target
         << " within " << timeout.count() << " ms (last: " << last
         << ", replay: " << replay_state() << ", streaming: " << (streaming() ? "yes" : "no")
         << ")";
}

char proc_state(int pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(stat, line))
    return '?';
  auto close = line.rfind(')');  // the command name may hold spaces and parentheses
  return close == std::string::npos || close + 2 >= line.size() ? '?' : line[close + 2];
}

}  // namespace

std::string maintenance_url() { return env("WAGGLE_TEST_STANDBY_URL"); }
std::string primary_url() { return env("WAGGLE_TEST_DATABASE_URL"); }
std::string url_for(const std::string& db) { return with_database(maintenance_url(), db); }
int port() { return port_of(maintenance_url()); }
int primary_port() { return port_of(primary_url()); }

::testing::AssertionResult configured() {
  if (primary_url().empty())
    return ::testing::AssertionFailure() << "WAGGLE_TEST_DATABASE_URL is not set";
  if (maintenance_url().empty())
    return ::testing::AssertionFailure()
           << "WAGGLE_TEST_STANDBY_URL is not set: ./scripts/test starts the standby and exports "
              "it; by hand: ./scripts/pg start test && eval \"$(./scripts/pg env test)\"";
  std::string error;
  auto p = scalar(primary_url(), "SELECT system_identifier::text FROM pg_control_system()", &error);
  if (!p)
    return ::testing::AssertionFailure() << "the primary does not answer: " << error;
  auto s = scalar(maintenance_url(),
                  "SELECT system_identifier::text || ' ' || pg_is_in_recovery()::text "
                  "FROM pg_control_system()",
                  &error);
  if (!s)
    return ::testing::AssertionFailure()
           << "the standby (WAGGLE_TEST_STANDBY_URL) does not answer: " << error
           << " (./scripts/pg start standby starts it)";
  if (*s != *p + " true")
    return ::testing::AssertionFailure()
           << "WAGGLE_TEST_STANDBY_URL is not a standby of WAGGLE_TEST_DATABASE_URL (system "
              "identifier and in-recovery: "
           << *s << "; the primary's identifier: " << *p << ")";
  return ::testing::AssertionSuccess();
}

bool accepts_connections() { return scalar(maintenance_url(), "SELECT 1").has_value(); }

bool streaming() {
  return scalar(maintenance_url(), "SELECT status FROM pg_stat_wal_receiver").value_or("") ==
         "streaming";
}

std::string replay_state() {
  return scalar(maintenance_url(), "SELECT pg_get_wal_replay_pause_state()").value_or("");
}

::testing::AssertionResult pause_replay(std::chrono::milliseconds timeout) {
  std::string error;
  if (!scalar(maintenance_url(), "SELECT pg_wal_replay_pause()", &error))
    return ::testing::AssertionFailure() << "pg_wal_replay_pause() failed: " << error;
  if (poll(timeout, [] { return replay_state() == "paused"; }))
    return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "replay not paused within " << timeout.count()
                                       << " ms (state: " << replay_state() << ")";
}

::testing::AssertionResult resume_replay(std::chrono::milliseconds timeout) {
  std::string error;
  if (!scalar(maintenance_url(), "SELECT pg_wal_replay_resume()", &error))
    return ::testing::AssertionFailure() << "pg_wal_replay_resume() failed: " << error;
  if (poll(timeout, [] { return replay_state() == "not paused"; }))
    return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "replay not resumed within " << timeout.count()
                                       << " ms (state: " << replay_state() << ")";
}

::testing::AssertionResult wait_replayed(const std::string& primary,
                                         std::chrono::milliseconds timeout) {
  return lsn_reached(primary, "pg_last_wal_replay_lsn", timeout);
}

::testing::AssertionResult wait_received(const std::string& primary,
                                         std::chrono::milliseconds timeout) {
  return lsn_reached(primary, "pg_last_wal_receive_lsn", timeout);
}

::testing::AssertionResult stop_standby() {
  auto [rc, out] = run_script("stop");
  if (rc != 0)
    return ::testing::AssertionFailure() << "./scripts/pg stop standby exited " << rc << ":\n"
                                         << out;
  if (!poll(10s, [] { return !accepts_connections(); }))
    return ::testing::AssertionFailure()
           << "the script stopped a standby, but WAGGLE_TEST_STANDBY_URL still answers (another "
              "data dir than the test run's? WAGGLE_DATA_DIR):\n"
           << out;
  return ::testing::AssertionSuccess();
}

::testing::AssertionResult start_standby(std::chrono::milliseconds timeout) {
  auto [rc, out] = run_script("start");
  if (rc != 0)
    return ::testing::AssertionFailure() << "./scripts/pg start standby exited " << rc << ":\n"
                                         << out;
  if (!poll(timeout, [] { return streaming(); }))
    return ::testing::AssertionFailure() << "the standby does not stream within "
                                         << timeout.count() << " ms of its start:\n"
                                         << out;
  return ::testing::AssertionSuccess();
}

::testing::AssertionResult make_healthy() {
  if (!accepts_connections()) {
    if (auto started = start_standby(); !started)
      return started;
  }
  if (replay_state() != "not paused") {
    if (auto resumed = resume_replay(); !resumed)
      return resumed;
  }
  if (!poll(30s, [] { return streaming(); }))
    return ::testing::AssertionFailure() << "the standby does not stream from the primary";
  return configured();
}

restore_on_exit::~restore_on_exit() {
  if (maintenance_url().empty() || primary_url().empty())
    return;  // SetUp has failed the test already
  auto healthy = make_healthy();
  EXPECT_TRUE(healthy) << "while putting the standby back after the test";
}

std::vector<int> backend_pids(const std::string& db) {
  std::vector<int> out;
  try {
    pqxx::connection c(maintenance_url());
    pqxx::nontransaction tx(c);
    for (const auto& row : tx.exec_params(
           "SELECT pid FROM pg_stat_activity WHERE datname = $1 AND backend_type = 'client "
           "backend' AND pid <> pg_backend_pid() ORDER BY pid",
           db))
      out.push_back(row[0].as<int>());
  } catch (const std::exception&) {
  }
  return out;
}

::testing::AssertionResult stop_backend(int pid, std::chrono::milliseconds timeout) {
  if (::kill(pid, SIGSTOP) != 0)
    return ::testing::AssertionFailure() << "kill(" << pid << ", SIGSTOP) failed";
  if (poll(timeout, [pid] { return proc_state(pid) == 'T'; }))
    return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "backend " << pid << " not stopped (state "
                                       << proc_state(pid) << ")";
}

::testing::AssertionResult continue_backend(int pid, std::chrono::milliseconds timeout) {
  if (::kill(pid, SIGCONT) != 0)
    return ::testing::AssertionFailure() << "kill(" << pid << ", SIGCONT) failed";
  if (poll(timeout, [pid] { return proc_state(pid) != 'T'; }))
    return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "backend " << pid << " still stopped";
}

stopped_backend::stopped_backend(int pid) : pid_(pid), stopped_(stop_backend(pid)) {}

stopped_backend::~stopped_backend() {
  if (proc_state(pid_) == 'T') {
    EXPECT_TRUE(continue_backend(pid_));
  }
}

}  // namespace waggle::standby
