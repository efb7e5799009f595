// Migrations: embedded at build time, applied once, refused when they changed
// or when the database is newer than the binary, serialised between nodes.

#include <latch>
#include <thread>

#include "tests/support/pg_fixture.hpp"
#include "tests/support/test_paths.hpp"

namespace waggle::pgtest {
namespace {

class MigrateTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_FALSE(admin_url().empty()) << "WAGGLE_TEST_DATABASE_URL is not set";
  }
};

int64_t ledger_rows(pqxx::connection& c) {
  pqxx::nontransaction tx(c);
  return tx.exec("SELECT count(*) FROM schema_migrations")[0][0].as<int64_t>();
}

TEST_F(MigrateTest, EmbeddedMigrationsMatchTheSqlFiles) {
  const auto& all = db::embedded_migrations();
  ASSERT_FALSE(all.empty());
  EXPECT_EQ(all.front().version, 1);
  EXPECT_EQ(all.front().name, "0001_init");
  for (size_t i = 1; i < all.size(); ++i)
    EXPECT_LT(all[i - 1].version, all[i].version);
  // Byte for byte what is in migrations/ (the build re-embeds on change).
  for (const auto& m : all) {
    std::FILE* f = std::fopen((std::string(waggle::test_paths::source_dir) + "/migrations/" + m.name + ".sql").c_str(), "rb");
    ASSERT_NE(f, nullptr) << m.name;
    std::string text;
    char buf[4096];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, f)) > 0)
      text.append(buf, n);
    std::fclose(f);
    EXPECT_EQ(m.sql, text) << m.name;
    EXPECT_EQ(m.checksum.size(), 64u);
  }
}

TEST_F(MigrateTest, ApplyingTwiceIsANoOp) {
  scratch_database sdb("migrate");
  auto c = sdb.connect();
  const auto& all = db::embedded_migrations();
  EXPECT_FALSE(db::migrations_current(*c, all));
  auto first = db::apply_migrations(*c, all);
  ASSERT_TRUE(first.has_value()) << first.error().reason;
  EXPECT_EQ(*first, static_cast<int>(all.size()));
  EXPECT_TRUE(db::migrations_current(*c, all));
  auto second = db::apply_migrations(*c, all);
  ASSERT_TRUE(second.has_value()) << second.error().reason;
  EXPECT_EQ(*second, 0);
  EXPECT_EQ(ledger_rows(*c), static_cast<int64_t>(all.size()));
  EXPECT_TRUE(db::migrations_current(*c, all));
}

TEST_F(MigrateTest, ChangedChecksumIsRefusedNamingTheMigration) {
  scratch_database sdb("migrate");
  auto c = sdb.connect();
  auto all = db::embedded_migrations();
  ASSERT_TRUE(db::apply_migrations(*c, all).has_value());

  // The binary now embeds a different text for an applied migration.
  auto changed = all;
  changed[0].sql += "\n-- edited after release\n";
  changed[0].checksum = std::string(64, 'a');
  auto r = db::apply_migrations(*c, changed);
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().code, ec::internal);
  EXPECT_NE(r.error().reason.find("0001_init"), std::string::npos) << r.error().reason;
  EXPECT_NE(r.error().reason.find("checksum"), std::string::npos) << r.error().reason;
  EXPECT_FALSE(db::migrations_current(*c, changed));
  EXPECT_TRUE(db::migrations_current(*c, all));
}

TEST_F(MigrateTest, UnknownNewerMigrationIsRefused) {
  scratch_database sdb("migrate");
  auto c = sdb.connect();
  const auto& all = db::embedded_migrations();
  ASSERT_TRUE(db::apply_migrations(*c, all).has_value());
  {
    pqxx::work tx(*c);
    tx.exec("INSERT INTO schema_migrations (version, name, checksum) "
            "VALUES (9999, '9999_from_the_future', 'x')");
    tx.commit();
  }
  auto r = db::apply_migrations(*c, all);
  ASSERT_FALSE(r.has_value());
  EXPECT_NE(r.error().reason.find("9999_from_the_future"), std::string::npos) << r.error().reason;
  EXPECT_FALSE(db::migrations_current(*c, all));
}

TEST_F(MigrateTest, NewMigrationIsAppliedInItsOwnTransactionAndRecorded) {
  scratch_database sdb("migrate");
  auto c = sdb.connect();
  auto all = db::embedded_migrations();
  ASSERT_TRUE(db::apply_migrations(*c, all).has_value());

  db::migration good{9001, "9001_good", "CREATE TABLE t_good (x int);", ""};
  db::migration bad{9002, "9002_bad", "CREATE TABLE t_bad (x int); SELECT 1/0;", ""};
  good.checksum = std::string(64, '1');
  bad.checksum = std::string(64, '2');
  auto with_bad = all;
  with_bad.push_back(good);
  with_bad.push_back(bad);
  auto r = db::apply_migrations(*c, with_bad);
  ASSERT_FALSE(r.has_value());
  EXPECT_NE(r.error().reason.find("9002_bad"), std::string::npos) << r.error().reason;

  pqxx::nontransaction tx(*c);
  // 9001 committed with its ledger row; 9002 left nothing behind.
  EXPECT_EQ(tx.exec("SELECT count(*) FROM schema_migrations WHERE version = 9001")[0][0].as<int>(), 1);
  EXPECT_EQ(tx.exec("SELECT count(*) FROM schema_migrations WHERE version = 9002")[0][0].as<int>(), 0);
  EXPECT_TRUE(tx.exec("SELECT to_regclass('t_good') IS NOT NULL")[0][0].as<bool>());
  EXPECT_FALSE(tx.exec("SELECT to_regclass('t_bad') IS NOT NULL")[0][0].as<bool>());
}

// Two nodes start at once. Deterministic: the test holds the migration lock
// until BOTH appliers are seen waiting on it, then lets them go; exactly one
// applies everything, the other finds nothing to do.
TEST_F(MigrateTest, ConcurrentAppliersSerialiseOnTheAdvisoryLock) {
  scratch_database sdb("migrate");
  const auto& all = db::embedded_migrations();
  auto holder = sdb.connect();
  {
    pqxx::nontransaction tx(*holder);
    tx.exec("SELECT pg_advisory_lock(hashtextextended('waggle_migrations', 0))");
  }
  auto c1 = sdb.connect();
  auto c2 = sdb.connect();
  int pid1 = c1->backendpid(), pid2 = c2->backendpid();
  std::latch start(2);
  std::optional<result<int>> r1, r2;
  std::string e1, e2;
  auto run = [&](pqxx::connection& c, std::optional<result<int>>& r, std::string& err) {
    start.arrive_and_wait();
    try {
      r.emplace(db::apply_migrations(c, all));
    } catch (const std::exception& e) {
      err = e.what();
    }
  };
  std::thread t1(run, std::ref(*c1), std::ref(r1), std::ref(e1));
  std::thread t2(run, std::ref(*c2), std::ref(r2), std::ref(e2));
  bool both_waited = eventually([&] {
    return waits_on_advisory_lock(*holder, pid1) && waits_on_advisory_lock(*holder, pid2);
  });
  {
    pqxx::nontransaction tx(*holder);
    tx.exec("SELECT pg_advisory_unlock(hashtextextended('waggle_migrations', 0))");
  }
  t1.join();
  t2.join();
  EXPECT_TRUE(both_waited) << "the appliers did not wait on the migration lock";
  ASSERT_TRUE(e1.empty()) << e1;
  ASSERT_TRUE(e2.empty()) << e2;
  ASSERT_TRUE(r1 && r1->has_value()) << (r1 ? r1->error().reason : "no result");
  ASSERT_TRUE(r2 && r2->has_value()) << (r2 ? r2->error().reason : "no result");
  EXPECT_EQ(**r1 + **r2, static_cast<int>(all.size()));
  EXPECT_TRUE((**r1 == 0) != (**r2 == 0));
  EXPECT_EQ(ledger_rows(*holder), static_cast<int64_t>(all.size()));
}

// The same race without a held lock, repeated: both succeed, applied once.
TEST_F(MigrateTest, ConcurrentAppliersRaceFreely) {
  const auto& all = db::embedded_migrations();
  for (int round = 0; round < 5; ++round) {
    scratch_database sdb("migrate");
    auto c1 = sdb.connect();
    auto c2 = sdb.connect();
    std::latch start(2);
    std::optional<result<int>> r1, r2;
    std::string e1, e2;
    auto run = [&](pqxx::connection& c, std::optional<result<int>>& r, std::string& err) {
      start.arrive_and_wait();
      try {
        r.emplace(db::apply_migrations(c, all));
      } catch (const std::exception& e) {
        err = e.what();
      }
    };
    std::thread t1(run, std::ref(*c1), std::ref(r1), std::ref(e1));
    std::thread t2(run, std::ref(*c2), std::ref(r2), std::ref(e2));
    t1.join();
    t2.join();
    ASSERT_TRUE(e1.empty()) << e1;
    ASSERT_TRUE(e2.empty()) << e2;
    ASSERT_TRUE(r1 && r1->has_value()) << (r1 ? r1->error().reason : "");
    ASSERT_TRUE(r2 && r2->has_value()) << (r2 ? r2->error().reason : "");
    EXPECT_EQ(**r1 + **r2, static_cast<int>(all.size()));
    EXPECT_EQ(ledger_rows(*c1), static_cast<int64_t>(all.size()));
  }
}

TEST_F(MigrateTest, TenantKeysLeadWithCommunityId) {
  scratch_database sdb("migrate");
  auto c = sdb.connect();
  ASSERT_TRUE(db::apply_migrations(*c, db::embedded_migrations()).has_value());
  pqxx::nontransaction tx(*c);
  // Every index of a table that has a community_id column starts with it,
  // but the delivery queues' due indexes: the node claims them across
  // communities (docs/delivery.md), so they lead with the receiver; and the
  // cluster tail's cursors, which read what committed in every community by
  // transaction id (docs/scaling.md).
  auto r = tx.exec(R"sql(
    SELECT i.indexrelid::regclass::text
      FROM pg_index i
      JOIN pg_class t ON t.oid = i.indrelid
      JOIN pg_namespace n ON n.oid = t.relnamespace AND n.nspname = 'public'
     WHERE EXISTS (SELECT 1 FROM pg_attribute a
                    WHERE a.attrelid = t.oid AND a.attname = 'community_id' AND NOT a.attisdropped)
       AND (i.indkey[0] = 0 OR (SELECT attname FROM pg_attribute
                                 WHERE attrelid = t.oid AND attnum = i.indkey[0]) <> 'community_id')
       AND i.indexrelid::regclass::text NOT IN ('operator_listener_outbox_due', 'push_match_queue_due',
                                                       'push_wake_outbox_due', 'push_wake_outbox_age',
                                                       'events_commit_xid',
                                                       'community_changes_commit_xid')
  )sql");
  for (const auto& row : r)
    ADD_FAILURE() << "index does not lead with community_id: " << row[0].as<std::string>();
  // and every such column is NOT NULL
  auto nn = tx.exec(R"sql(
    SELECT c.table_name FROM information_schema.columns c
     WHERE c.table_schema = 'public' AND c.column_name = 'community_id' AND c.is_nullable = 'YES')sql");
  for (const auto& row : nn)
    ADD_FAILURE() << "nullable community_id in " << row[0].as<std::string>();
}

}  // namespace
}  // namespace waggle::pgtest
