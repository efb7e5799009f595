// `waggle sync` between two waggle databases (docs/negentropy.md, "waggle sync"): relay A
// serves alpha.test (in this process); database B is a second community store with its own
// events, synced both ways through the binary. After the sync both `waggle export`s are
// identical; a sync cut short (--limit) and run again finishes without storing anything twice.

#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>

#include "tests/e2e/node_fixture.hpp"
#include "tests/support/test_paths.hpp"

namespace waggle::e2e {
namespace {

struct run_result {
  int code = -1;
  std::string out;
};

run_result run(const std::string& cmd) {
  run_result r;
  FILE* p = popen(cmd.c_str(), "r");
  if (!p)
    return r;
  char buf[4096];
  while (size_t n = fread(buf, 1, sizeof(buf), p))
    r.out.append(buf, n);
  int st = pclose(p);
  r.code = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return r;
}

const std::string syncer = pgtest::secret(41);
const std::string carol = pgtest::secret(42);

class sync_e2e : public node_e2e {
 protected:
  static void SetUpTestSuite() {
    configure_ = [](node_config& cfg, gateway::server_limits&) {
      cfg.sync_pubkeys = {proto::pubkey_of(syncer)};
    };
    node_e2e::SetUpTestSuite();
    other_ = new pgtest::scratch_database("sync_b", pgtest::scratch_database::content::migrated);
    auto conn = other_->connect();
    ASSERT_TRUE(db::apply_migrations(*conn, db::embedded_migrations()).has_value());
    ASSERT_TRUE(db::add_community(*conn, "alpha.test", "Alpha B", community_policy::open).has_value());
    other_key_ = key_dir_ / "other-relay.key";
  }
  static void TearDownTestSuite() {
    delete other_;
    other_ = nullptr;
    node_e2e::TearDownTestSuite();
  }

  std::string bin() const { return std::string(test_paths::binary); }

  run_result sync(const std::string& extra) {
    return run("WAGGLE_SYNC_SECRET_KEY=" + syncer + " WAGGLE_RELAY_KEY_FILE='" +
               other_key_.string() + "' " + bin() + " sync ws://alpha.test:" +
               std::to_string(port_) + "/ --connect-to 127.0.0.1:" + std::to_string(port_) +
               " --community alpha.test --database-url '" + other_->url() + "' " + extra +
               " 2>&1");
  }
  run_result export_of(const std::string& url) {
    return run(bin() + " export --community alpha.test --database-url '" + url + "' 2>/dev/null");
  }
  // Events only B has: imported there (older than A's created_at window).
  void seed_b(int n, const std::string& tag) {
    auto file = key_dir_ / ("seed-" + tag + ".jsonl");
    std::ofstream out(file);
    for (int i = 0; i < n; ++i)
      out << test::event_builder{carol}.kind(1).at(pgtest::wall_now() - 5000 - i)
               .content("only on B " + tag + " " + std::to_string(i)).sign().raw
          << "\n";
    out.close();
    auto r = run("WAGGLE_RELAY_KEY_FILE='" + other_key_.string() + "' " + bin() + " import '" +
                 file.string() + "' --community alpha.test --database-url '" + other_->url() +
                 "' 2>&1");
    ASSERT_EQ(r.code, 0) << r.out;
  }
  int64_t rows_in_b() {
    auto conn = other_->connect();
    pqxx::read_transaction tx(*conn);
    return tx.exec("SELECT count(*) FROM events").at(0).at(0).as<int64_t>();
  }

  static inline pgtest::scratch_database* other_ = nullptr;
  static inline std::filesystem::path other_key_;
};

TEST_F(sync_e2e, a_sync_both_ways_makes_the_two_exports_identical) {
  auto a = login("alpha.test", alice);
  for (int i = 0; i < 40; ++i)
    ASSERT_NE(publish(*a, signed_event(alice, 1, "only on A " + std::to_string(i))).find(",true,"),
              std::string::npos);
  auto create = signed_event(alice, 9007, "", {{"h", "general"}});
  ASSERT_NE(publish(*a, create).find(",true,"), std::string::npos);
  for (int i = 0; i < 5; ++i)
    ASSERT_NE(publish(*a, signed_event(alice, 9, "in general " + std::to_string(i), {{"h", "general"}}))
                .find(",true,"),
              std::string::npos);
  seed_b(30, "first");

  auto outside = sync("--dir both");
  ASSERT_EQ(outside.code, 0) << outside.out;
  auto channel = sync("--dir both --filter '{\"#h\":[\"general\"]}'");
  ASSERT_EQ(channel.code, 0) << channel.out;

  auto ea = export_of(db_->url()), eb = export_of(other_->url());
  ASSERT_EQ(ea.code, 0);
  ASSERT_EQ(eb.code, 0);
  EXPECT_FALSE(ea.out.empty());
  EXPECT_EQ(ea.out, eb.out) << "the two exports differ after a sync both ways";
  // Both have the 40 + 30 notes, the channel's command and its 5 posts.
  EXPECT_EQ(std::count(ea.out.begin(), ea.out.end(), '\n'), 40 + 30 + 1 + 5);

  // A second sync finds nothing to move: only A's relay-signed state differs,
  // which is never carried (B signs its own).
  auto again = sync("--dir both");
  ASSERT_EQ(again.code, 0) << again.out;
  EXPECT_NE(again.out.find(": 0 only here,"), std::string::npos) << again.out;
  EXPECT_NE(again.out.find("down stored 0, duplicates 0, refused 0"), std::string::npos) << again.out;
  EXPECT_NE(again.out.find("up accepted 0, duplicates 0, refused 0"), std::string::npos) << again.out;
}

TEST_F(sync_e2e, an_interrupted_sync_resumes_without_duplicates) {
  auto a = login("alpha.test", bob);
  for (int i = 0; i < 25; ++i)
    ASSERT_NE(publish(*a, signed_event(bob, 1, "later on A " + std::to_string(i))).find(",true,"),
              std::string::npos);
  auto before = rows_in_b();
  auto cut = sync("--dir down --limit 10");
  ASSERT_EQ(cut.code, 0) << cut.out;
  EXPECT_NE(cut.out.find("down stored 10, duplicates 0"), std::string::npos) << cut.out;
  EXPECT_EQ(rows_in_b(), before + 10);
  auto rest = sync("--dir down");
  ASSERT_EQ(rest.code, 0) << rest.out;
  EXPECT_NE(rest.out.find("down stored 15, duplicates 0"), std::string::npos) << rest.out;
  EXPECT_EQ(rows_in_b(), before + 25);
  EXPECT_EQ(export_of(db_->url()).out, export_of(other_->url()).out);
}

}  // namespace
}  // namespace waggle::e2e
