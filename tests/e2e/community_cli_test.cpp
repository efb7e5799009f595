// `waggle community member|admin|policy` against the real binary
// (docs/management.md): changes, listings, audit rows, clear errors and the
// exit codes 0 (done), 1 (refused, unknown host), 2 (usage).

#include <sys/wait.h>

#include <cstdio>

#include <gtest/gtest.h>

#include "db/community_store.hpp"
#include "db/migrate.hpp"
#include "tests/support/pg_fixture.hpp"
#include "tests/support/test_paths.hpp"

namespace waggle::pgtest {
namespace {

struct run_result {
  int code = -1;
  std::string out;  // stdout and stderr
};

class CommunityCli : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    ASSERT_FALSE(admin_url().empty()) << "WAGGLE_TEST_DATABASE_URL is not set";
    db_ = new scratch_database("cli");
    auto conn = db_->connect();
    ASSERT_TRUE(db::apply_migrations(*conn, db::embedded_migrations()).has_value());
    ASSERT_TRUE(db::add_community(*conn, "cli.test", "CLI", community_policy::closed).has_value());
  }
  static void TearDownTestSuite() { delete db_; }

  run_result waggle(const std::string& args) {
    std::string cmd = std::string(waggle::test_paths::binary) + " community " + args + " --database-url '"
                      + db_->url() + "' 2>&1";
    run_result r;
    FILE* p = popen(cmd.c_str(), "r");
    if (!p)
      return r;
    char buf[512];
    while (size_t n = fread(buf, 1, sizeof(buf), p))
      r.out.append(buf, n);
    int st = pclose(p);
    r.code = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    return r;
  }

  int64_t cli_audits(const std::string& method) {
    auto conn = db_->connect();
    pqxx::read_transaction tx(*conn);
    return tx.exec_params("SELECT count(*) FROM community_audit WHERE via = 'cli' AND method = $1",
                          method)[0][0].as<int64_t>();
  }

  static inline scratch_database* db_ = nullptr;
  const std::string alice = proto::pubkey_of(secret(31));
  const std::string bob = proto::pubkey_of(secret(32));
};

TEST_F(CommunityCli, MemberAddListRemove) {
  EXPECT_EQ(waggle("member add cli.test " + alice + " --role owner").code, 0);
  EXPECT_EQ(waggle("member add cli.test " + bob).code, 0);
  auto list = waggle("member list cli.test");
  EXPECT_EQ(list.code, 0);
  EXPECT_NE(list.out.find(alice + "\towner"), std::string::npos) << list.out;
  EXPECT_NE(list.out.find(bob + "\tmember"), std::string::npos) << list.out;
  EXPECT_EQ(waggle("admin add cli.test " + bob).code, 0);
  EXPECT_NE(waggle("admin list cli.test").out.find(bob + "\tadmin"), std::string::npos);
  EXPECT_EQ(waggle("admin remove cli.test " + bob).code, 0);
  EXPECT_EQ(waggle("admin list cli.test").out.find(bob), std::string::npos);
  EXPECT_EQ(waggle("member remove cli.test " + bob).code, 0);
  EXPECT_EQ(waggle("member list cli.test").out.find(bob), std::string::npos);
  // The last owner stays.
  auto last = waggle("member remove cli.test " + alice);
  EXPECT_EQ(last.code, 1) << last.out;
  EXPECT_NE(waggle("member list cli.test").out.find(alice), std::string::npos);
  EXPECT_EQ(cli_audits("member add"), 2);
  EXPECT_EQ(cli_audits("member remove"), 2);  // one done, one refused
}

TEST_F(CommunityCli, PolicyPrintsAndSets) {
  auto now = waggle("policy cli.test");
  EXPECT_EQ(now.code, 0);
  EXPECT_EQ(now.out, "closed\n");
  EXPECT_EQ(waggle("policy cli.test invite").code, 0);
  EXPECT_EQ(waggle("policy cli.test").out, "invite\n");
  EXPECT_EQ(waggle("policy cli.test sometimes").code, 2);
  EXPECT_EQ(waggle("policy cli.test").out, "invite\n");
  EXPECT_EQ(cli_audits("policy"), 1);
}

TEST_F(CommunityCli, ClearErrors) {
  auto unknown = waggle("member list nobody.test");
  EXPECT_EQ(unknown.code, 1);
  EXPECT_NE(unknown.out.find("unknown community host nobody.test"), std::string::npos);
  auto bad = waggle("member add cli.test nothex");
  EXPECT_EQ(bad.code, 2);
  EXPECT_NE(bad.out.find("PUBKEY must be 64 lowercase hex"), std::string::npos) << bad.out;
  EXPECT_EQ(waggle("member add cli.test " + alice + " --role king").code, 2);
  EXPECT_EQ(waggle("member frobnicate cli.test").code, 2);
}

}  // namespace
}  // namespace waggle::pgtest
