// Fail-closed start-up: the real binary refuses to serve when the roster
// fence (migration 0003_roster_fence) is missing, disabled or inert, naming
// the migration, and serves once it is re-applied. A node's start-up also
// repairs a stored 39002 that differs from the membership (a capped one).

#include <chrono>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include <gtest/gtest.h>
#include <spawn.h>
#include <sys/wait.h>

#include <boost/asio.hpp>

#include "actors/node/node.hpp"
#include "db/group_store.hpp"
#include "db/roster_fence.hpp"
#include "gateway/ws_client.hpp"
#include "tests/support/free_port.hpp"
#include "tests/support/pg_fixture.hpp"
#include "tests/support/test_paths.hpp"

extern char** environ;

using namespace waggle;
using namespace std::chrono_literals;

namespace {

using e2e::free_port;

std::string read_file(const std::filesystem::path& p) {
  std::ifstream in{p};
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

struct run_result {
  bool exited = false;
  int code = -1;
  bool served = false;
  std::string output;  // stderr and stdout
};

// Runs `waggle serve` on a scratch database until it exits or answers
// /readyz 200 (then SIGTERM); never longer than `bound`.
run_result serve_once(const std::string& url, std::chrono::seconds bound) {
  auto dir = std::filesystem::temp_directory_path() /
             ("waggle-startup-" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  auto out_path = dir / "out.log";
  auto port = free_port();
  std::vector<std::string> args = {waggle::test_paths::binary,    "serve", "--port", std::to_string(port),
                                   "--database-url", url,     "--data-dir", dir.string(),
                                   "--startup-timeout", "10", "--log-level", "warn"};
  std::vector<char*> argv;
  for (auto& a : args)
    argv.push_back(a.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  posix_spawn_file_actions_adddup2(&fa, 1, 2);
  pid_t pid = 0;
  run_result r;
  if (posix_spawn(&pid, waggle::test_paths::binary, &fa, nullptr, argv.data(), environ) != 0)
    return r;
  posix_spawn_file_actions_destroy(&fa);
  auto until = std::chrono::steady_clock::now() + bound;
  int status = 0;
  while (std::chrono::steady_clock::now() < until) {
    if (waitpid(pid, &status, WNOHANG) == pid) {
      r.exited = true;
      break;
    }
    if (gateway::http_request("127.0.0.1", port, "GET", "/readyz", {}, {}, 1s).status == 200) {
      r.served = true;
      ::kill(pid, SIGTERM);
      waitpid(pid, &status, 0);
      r.exited = true;
      break;
    }
    std::this_thread::sleep_for(50ms);  // waiting for start-up, not timing it
  }
  if (!r.exited) {
    ::kill(pid, SIGKILL);
    waitpid(pid, &status, 0);
  }
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.output = read_file(out_path);
  std::filesystem::remove_all(dir);
  return r;
}

class startup_fence : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_FALSE(pgtest::admin_url().empty()) << "WAGGLE_TEST_DATABASE_URL is not set";
    db_ = std::make_unique<pgtest::scratch_database>(
      "startup", pgtest::scratch_database::content::migrated);
    auto conn = db_->connect();
    ASSERT_TRUE(db::apply_migrations(*conn, db::embedded_migrations()).has_value());
    ASSERT_TRUE(db::add_community(*conn, "127.0.0.1", "", community_policy::open).has_value());
  }
  void exec(const std::string& sql) {
    auto conn = db_->connect();
    pqxx::nontransaction tx{*conn};
    tx.exec(sql);
  }
  void reapply_fence_migration() {
    exec(read_file(std::filesystem::path{waggle::test_paths::source_dir} / "migrations" /
                   "0003_roster_fence.sql"));
  }
  void expect_refusal(const char* why) {
    auto r = serve_once(db_->url(), 60s);
    EXPECT_FALSE(r.served) << why;
    EXPECT_EQ(r.code, 3) << why << "\n" << r.output;
    EXPECT_NE(r.output.find("0003_roster_fence"), std::string::npos) << why << "\n" << r.output;
    reapply_fence_migration();
    auto fixed = serve_once(db_->url(), 60s);
    EXPECT_TRUE(fixed.served) << "after re-applying the migration\n" << fixed.output;
    EXPECT_EQ(fixed.code, 0) << fixed.output;
  }
  std::unique_ptr<pgtest::scratch_database> db_;
};

TEST_F(startup_fence, refuses_without_the_trigger) {
  exec("DROP TRIGGER waggle_roster_fence ON events");
  expect_refusal("trigger dropped");
}

TEST_F(startup_fence, refuses_with_the_trigger_disabled) {
  exec("ALTER TABLE events DISABLE TRIGGER waggle_roster_fence");
  expect_refusal("trigger disabled");
}

TEST_F(startup_fence, refuses_an_intact_looking_but_inert_trigger_function) {
  exec("CREATE OR REPLACE FUNCTION waggle_roster_fence() RETURNS trigger "
       "LANGUAGE plpgsql AS $$ BEGIN RETURN NEW; END $$");
  expect_refusal("inert function");
}

TEST_F(startup_fence, serves_with_the_migration_applied) {
  auto r = serve_once(db_->url(), 60s);
  EXPECT_TRUE(r.served) << r.output;
  EXPECT_EQ(r.code, 0) << r.output;
}

// A 1,501-member channel whose stored 39002 was cut at 1,000 (as an old
// relay with a member cap would have stored it): the node's start-up
// republishes it with all 1,501.
TEST_F(startup_fence, start_up_repairs_a_truncated_roster) {
  auto key_dir = std::filesystem::temp_directory_path() /
                 ("waggle-startup-key-" + std::to_string(getpid()));
  std::filesystem::create_directories(key_dir);
  auto key_file = (key_dir / "relay.key").string();
  auto relay_secret = load_or_create_relay_key(key_file);
  auto relay_pk = proto::pubkey_of(relay_secret);
  const std::string owner = proto::pubkey_of(pgtest::secret(1));
  exec("INSERT INTO channels (community_id, id, created_by) VALUES (1, 'big', decode('" + owner +
       "', 'hex'))");
  exec("INSERT INTO channel_members (community_id, channel_id, pubkey, role, added_by) "
       "VALUES (1, 'big', decode('" + owner + "', 'hex'), 'owner', decode('" + owner + "', 'hex'))");
  exec("INSERT INTO channel_members (community_id, channel_id, pubkey, role, added_by) "
       "SELECT 1, 'big', decode(lpad(to_hex(i), 64, '0'), 'hex'), 'member', decode('" + owner +
       "', 'hex') FROM generate_series(1, 1500) AS i");
  // The capped snapshot, stored by "an old relay" without the fence.
  proto::event capped;
  capped.kind = 39002;
  capped.created_at = 1'700'000'000;
  capped.tags.push_back({"d", "big"});
  capped.tags.push_back({"p", owner, "", "owner"});
  for (int i = 1; i < 1000; ++i) {
    char hex[65];
    std::snprintf(hex, sizeof hex, "%064x", i);
    capped.tags.push_back({"p", hex, "", "member"});
  }
  proto::sign(capped, relay_secret);
  {
    auto conn = db_->connect();
    pqxx::work tx{*conn};
    // An old relay without the fence: neither of its triggers.
    tx.exec("ALTER TABLE events DISABLE TRIGGER waggle_roster_fence, "
            "DISABLE TRIGGER waggle_roster_fence_at_commit");
    db::write_events(tx, {ingest_item{1, std::make_shared<const proto::event>(capped)}});
    tx.exec("ALTER TABLE events ENABLE TRIGGER waggle_roster_fence, "
            "ENABLE TRIGGER waggle_roster_fence_at_commit");
    tx.commit();
  }
  {
    auto conn = db_->connect();
    ASSERT_EQ(db::stale_rosters(*conn, relay_pk).size(), 1u);
  }
  node_config cfg;
  cfg.database_url = db_->url();
  cfg.relay_key_file = key_file;
  {
    node relay{cfg, node_env::production()};
    auto st = relay.start_checks();
    ASSERT_TRUE(st.ok()) << st.reason;
    relay.stop();
  }
  auto conn = db_->connect();
  EXPECT_TRUE(db::stale_rosters(*conn, relay_pk).empty());
  pqxx::work tx{*conn};
  auto raw = tx.exec("SELECT raw FROM events WHERE community_id = 1 AND kind = 39002 "
                     "AND d_tag = 'big' AND deleted_at IS NULL")[0][0].as<std::string>();
  auto ev = proto::parse_event(raw);
  ASSERT_TRUE(ev.has_value());
  size_t members = 0;
  for (const auto& t : ev->tags)
    members += t.size() == 4 && t[0] == "p";
  EXPECT_EQ(members, 1501u);
  EXPECT_GT(ev->created_at, capped.created_at);
  std::filesystem::remove_all(key_dir);
}

}  // namespace
