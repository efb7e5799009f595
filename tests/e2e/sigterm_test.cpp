// The real binary under SIGTERM: it stops accepting, answers what is in
// flight, closes sockets with 1001 and exits 0 within its drain bound.

#include <chrono>
#include <csignal>
#include <filesystem>
#include <thread>

#include <gtest/gtest.h>
#include <rapidjson/document.h>
#include <spawn.h>
#include <sys/wait.h>

#include <boost/asio.hpp>

#include "gateway/ws_client.hpp"
#include "tests/support/free_port.hpp"
#include "messages/proto/event.hpp"
#include "tests/support/pg_fixture.hpp"
#include "tests/support/test_paths.hpp"

extern char** environ;

using namespace waggle;
using namespace std::chrono_literals;

namespace {

using e2e::free_port;

int64_t unix_now() {
  return std::chrono::duration_cast<std::chrono::seconds>(
           std::chrono::system_clock::now().time_since_epoch())
    .count();
}

TEST(sigterm, drains_closes_with_1001_and_exits_zero) {
  ASSERT_FALSE(pgtest::admin_url().empty()) << "WAGGLE_TEST_DATABASE_URL is not set";
  pgtest::scratch_database db{"sigterm"};
  {
    auto conn = db.connect();
    ASSERT_TRUE(db::apply_migrations(*conn, db::embedded_migrations()).has_value());
    ASSERT_TRUE(db::add_community(*conn, "127.0.0.1", "", community_policy::open).has_value());
  }
  auto dir = std::filesystem::temp_directory_path() / ("waggle-sigterm-" + std::to_string(getpid()));
  auto port = free_port();
  std::vector<std::string> args = {waggle::test_paths::binary, "serve", "--port", std::to_string(port),
                                   "--database-url", db.url(), "--data-dir", dir.string(),
                                   "--drain-seconds", "5", "--log-level", "warn"};
  std::vector<char*> argv;
  for (auto& a : args)
    argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = 0;
  ASSERT_EQ(posix_spawn(&pid, waggle::test_paths::binary, nullptr, nullptr, argv.data(), environ), 0);

  bool ready = false;
  for (int i = 0; i < 200 && !ready; ++i) {  // waiting for start-up, not timing anything
    ready = gateway::http_request("127.0.0.1", port, "GET", "/readyz", {}, {}, 1s).status == 200;
    if (!ready)
      std::this_thread::sleep_for(50ms);
  }
  ASSERT_TRUE(ready) << "relay did not become ready";

  gateway::ws_client c;
  ASSERT_TRUE(c.connect("127.0.0.1", port)) << c.error();
  auto challenge = c.read_text(5s);
  ASSERT_TRUE(challenge);
  rapidjson::Document d;
  d.Parse(challenge->c_str());
  proto::event auth;
  auth.kind = 22242;
  auth.created_at = unix_now();
  auth.tags = {{"relay", "ws://127.0.0.1:" + std::to_string(port)}, {"challenge", d[1].GetString()}};
  proto::sign(auth, pgtest::secret(5));
  c.send_text("[\"AUTH\"," + auth.raw + "]");
  ASSERT_NE(c.read_text(5s).value_or("").find(",true,"), std::string::npos);

  auto started = std::chrono::steady_clock::now();
  ASSERT_EQ(::kill(pid, SIGTERM), 0);
  while (c.read_text(10s)) {
  }
  EXPECT_FALSE(c.is_open());
  EXPECT_EQ(c.close_code(), 1001);

  int status = 0;
  pid_t done = 0;
  while ((done = waitpid(pid, &status, WNOHANG)) == 0
         && std::chrono::steady_clock::now() - started < 30s)
    std::this_thread::sleep_for(20ms);
  if (done == 0) {
    ::kill(pid, SIGKILL);
    waitpid(pid, &status, 0);
    FAIL() << "relay did not exit after SIGTERM";
  }
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
  // The bound is a contract of the binary (--drain-seconds 5), checked loosely.
  EXPECT_LT(std::chrono::steady_clock::now() - started, 15s);
  std::filesystem::remove_all(dir);
}

}  // namespace
