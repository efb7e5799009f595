// Plans on a fresh database (docs/write-path.md, "Plans on a fresh
// database"): the writer's generic plans, made once while events is empty,
// must still probe it by index once it has grown; and start-up statistics
// touch only tables that hold rows without statistics.

#include <algorithm>

#include <pqxx/nontransaction>

#include "db/migrate.hpp"
#include "db/statistics.hpp"
#include "tests/support/pg_fixture.hpp"

namespace waggle::pgtest {
namespace {

struct table_scans {
  int64_t seq = 0;
  int64_t idx = 0;
};

// The counters of `table` as the server has them once `writer`'s pending
// statistics are flushed (a backend flushes them when it goes idle, at most
// once a second unless asked).
table_scans scans_after_flush(pqxx::connection& writer, pqxx::connection& reader,
                              const std::string& table) {
  {
    pqxx::nontransaction tx(writer);
    tx.exec("SELECT pg_stat_force_next_flush()");
  }
  pqxx::nontransaction tx(reader);
  tx.exec("SELECT pg_stat_clear_snapshot()");
  auto r = tx.exec_params(
    "SELECT coalesce(seq_scan, 0), coalesce(idx_scan, 0) FROM pg_stat_user_tables "
    "WHERE relname = $1",
    table);
  return {r[0][0].as<int64_t>(), r[0][1].as<int64_t>()};
}

double reltuples(pqxx::connection& c, const std::string& table) {
  pqxx::nontransaction tx(c);
  return tx.exec_params("SELECT reltuples FROM pg_class WHERE oid = $1::regclass", table)[0][0]
    .as<double>();
}

// Fresh: never analyzed (planned as ten pages). Analyzed empty: planned as
// empty, where a probe by sequential scan looks free (an operator's vacuumdb
// -z on a new database; the benchmark's VACUUM (ANALYZE) before a run).
class PlannerStatistics : public ::testing::TestWithParam<bool> {};

TEST_P(PlannerStatistics, GenericPlansMadeOnAnEmptyDatabaseProbeEventsByIndex) {
  scratch_database sdb("fresh_plans");
  auto admin = sdb.connect();
  ASSERT_TRUE(db::apply_migrations(*admin, db::embedded_migrations()).has_value());
  if (GetParam()) {
    pqxx::nontransaction tx(*admin);
    tx.exec("ANALYZE");
  }
  auto community = db::add_community(*admin, "fresh.test", "fresh", community_policy::open);
  ASSERT_TRUE(community.has_value());
  // What a writer session is: its plans are made at the first batch and kept.
  auto writer = sdb.connect();
  {
    pqxx::nontransaction tx(*writer);
    for (const auto& setting : db::writer_session_settings())
      tx.exec(setting);
  }
  auto batch_of = [&](int first, int n) {
    std::vector<proto::event> evs;
    for (int i = first; i < first + n; ++i)
      evs.push_back(make_event(1 + i % 3, 1, 1000 + i, {{"t", "fresh"}}, "n" + std::to_string(i)));
    return batch(community->id, evs);
  };
  ASSERT_EQ(db::write_batch(*writer, batch_of(0, 1)).at(0).outcome, write_outcome::stored);
  auto before = scans_after_flush(*writer, *admin, "events");
  // Enough rows that a sequential scan per batch would read thousands of them.
  for (int b = 0; b < 60; ++b)
    for (auto& r : db::write_batch(*writer, batch_of(1 + b * 20, 20)))
      ASSERT_EQ(r.outcome, write_outcome::stored);
  auto after = scans_after_flush(*writer, *admin, "events");
  // A plan made while events was empty and kept scans it once per batch (60:
  // the red check). Something of PostgreSQL's own scans it a few times once,
  // whatever the writer does (7 seen at once, a few seconds in, not repeating).
  EXPECT_LT(after.seq - before.seq, 20)
    << "batches scanned events sequentially: a plan made while it was empty";
  EXPECT_GT(after.idx, before.idx);
}

INSTANTIATE_TEST_SUITE_P(FreshAndAnalyzedEmpty, PlannerStatistics, ::testing::Bool());

TEST(PlannerStartup, OnlyTablesWithRowsAndNoStatisticsAreAnalyzed) {
  scratch_database sdb("restored");
  auto c = sdb.connect();
  ASSERT_TRUE(db::apply_migrations(*c, db::embedded_migrations()).has_value());
  {
    pqxx::nontransaction tx(*c);
    // Autovacuum must not get there first.
    tx.exec("CREATE TABLE restored (x int) WITH (autovacuum_enabled = false)");
    tx.exec("INSERT INTO restored SELECT generate_series(1, 5000)");
  }
  ASSERT_LT(reltuples(*c, "restored"), 0);
  ASSERT_LT(reltuples(*c, "events"), 0) << "a new database starts without statistics";
  auto analyzed = db::analyze_missing_statistics(*c);
  EXPECT_NE(std::find(analyzed.begin(), analyzed.end(), "restored"), analyzed.end());
  EXPECT_EQ(std::find(analyzed.begin(), analyzed.end(), "events"), analyzed.end());
  EXPECT_EQ(reltuples(*c, "restored"), 5000);
  // Empty: left to PostgreSQL's ten-page assumption (analyzed empty, every
  // generic plan made before the next ANALYZE would scan it).
  EXPECT_LT(reltuples(*c, "events"), 0);
  EXPECT_TRUE(db::analyze_missing_statistics(*c).empty()) << "nothing is left to analyze";
}

}  // namespace
}  // namespace waggle::pgtest
