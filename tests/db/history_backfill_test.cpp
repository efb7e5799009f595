// The late-row watermark of migration 0010 (docs/replicas.md, "Late rows"):
// every late row has a visible mark at or after its insert from the moment it
// is visible itself; on-time rows add none; writers of late rows into one
// community never wait for each other; a bulk import writes about one mark a
// second and the table stays about a row per community.

#include <string>

#include <pqxx/nontransaction>

#include "db/heartbeat.hpp"
#include "tests/support/pg_fixture.hpp"

namespace waggle::pgtest {
namespace {

class HistoryBackfill : public PgTest {
 protected:
  // One raw row (the trigger's view of an insert), created `age` seconds ago
  // by the database's clock.
  static std::string insert_sql(int64_t c, const std::string& seed, int64_t age) {
    return "INSERT INTO events (community_id, id, pubkey, created_at, kind, raw) VALUES (" +
           std::to_string(c) + ", sha256('" + seed + "'::bytea), sha256('author'::bytea), " +
           "floor(extract(epoch FROM clock_timestamp()))::bigint - " + std::to_string(age) +
           ", 1, '{}')";
  }
  static double db_now(pqxx::transaction_base& tx) {
    return tx.exec("SELECT extract(epoch FROM clock_timestamp())::float8").at(0).at(0).as<double>();
  }
  double db_now(pqxx::connection& c) {
    pqxx::nontransaction tx(c);
    return db_now(tx);
  }
  // What db::backfill_watermark reads, inside an open transaction.
  static double watermark_in(pqxx::transaction_base& tx, int64_t c) {
    return tx.exec("SELECT coalesce(extract(epoch FROM max(last_at))::float8, 0) "
                   "FROM history_backfill WHERE community_id = " + std::to_string(c))
      .at(0).at(0).as<double>();
  }
  int marks(int64_t c) {
    pqxx::nontransaction tx(conn());
    return tx.exec("SELECT count(*) FROM history_backfill WHERE community_id = " +
                   std::to_string(c)).at(0).at(0).as<int>();
  }
};

TEST_F(HistoryBackfill, AnOnTimeRowAddsNoMark) {
  auto c = community();
  pqxx::nontransaction(conn()).exec(insert_sql(c, "on-time", 100));
  EXPECT_EQ(marks(c), 0);
  EXPECT_FALSE(db::backfill_watermark(conn(), c).has_value());
}

TEST_F(HistoryBackfill, ALateRowsMarkIsAtOrAfterItsInsert) {
  auto c = community();
  auto other = community("other");
  double before = db_now(conn());
  pqxx::nontransaction(conn()).exec(insert_sql(c, "late", 5000));
  auto w = db::backfill_watermark(conn(), c);
  ASSERT_TRUE(w.has_value());
  EXPECT_GE(*w, before);
  EXPECT_FALSE(db::backfill_watermark(conn(), other).has_value()) << "another community's mark";
}

// A second late row within the mark's second relies on the committed mark
// instead of adding one, and that mark is still at or after its insert.
TEST_F(HistoryBackfill, ALateRowInsideAVisibleMarkAddsNone) {
  auto c = community();
  pqxx::nontransaction(conn()).exec(insert_sql(c, "late-1", 5000));
  auto first = db::backfill_watermark(conn(), c);
  ASSERT_TRUE(first.has_value());
  double second_insert = db_now(conn());
  pqxx::nontransaction(conn()).exec(insert_sql(c, "late-2", 5000));
  double after = db_now(conn());
  auto w = db::backfill_watermark(conn(), c);
  ASSERT_TRUE(w.has_value());
  if (after <= *first)  // the second insert's trigger ran inside the first mark
    EXPECT_EQ(marks(c), 1);
  EXPECT_GE(*w, second_insert);
}

// A newer mark replaces the older ones of its community in its own
// transaction: the watermark only grows, and the table stays small.
TEST_F(HistoryBackfill, ANewerMarkReplacesTheOlderOnes) {
  auto c = community();
  pqxx::nontransaction(conn()).exec(insert_sql(c, "late-1", 5000));
  auto first = db::backfill_watermark(conn(), c);
  ASSERT_TRUE(first.has_value());
  ASSERT_TRUE(wait_past_late_marks(conn(), c));  // past the first mark: the next insert needs its own
  double second_insert = db_now(conn());
  pqxx::nontransaction(conn()).exec(insert_sql(c, "late-2", 5000));
  auto second = db::backfill_watermark(conn(), c);
  ASSERT_TRUE(second.has_value());
  EXPECT_GT(*second, *first);
  EXPECT_GE(*second, second_insert);
  EXPECT_EQ(marks(c), 1);
}

// The first version updated one row per community in place and held its lock
// until commit: an open import blocked every other late insert of the
// community (a one-statement-write test hung on it). Here a, open, has
// replaced the committed mark (its delete holds that row's lock) when b
// writes: b skips the locked row instead of waiting for a (red without SKIP
// LOCKED: b runs into lock_timeout).
TEST_F(HistoryBackfill, TwoOpenTransactionsWritingLateRowsNeverWait) {
  auto c = community();
  pqxx::nontransaction(conn()).exec(insert_sql(c, "earlier", 5000));
  auto earlier = db::backfill_watermark(conn(), c);
  ASSERT_TRUE(earlier.has_value());
  ASSERT_TRUE(wait_past_late_marks(conn(), c));  // past it: the next late insert replaces it
  auto a = connect();
  auto b = connect();
  pqxx::nontransaction ta(*a);
  pqxx::nontransaction tb(*b);
  ta.exec("BEGIN");
  ta.exec(insert_sql(c, "import-a", 5000));
  const double a_mark = watermark_in(ta, c);
  tb.exec("SET lock_timeout = '2s'");
  tb.exec("BEGIN");
  EXPECT_NO_THROW(tb.exec(insert_sql(c, "import-b", 5000)));
  EXPECT_NO_THROW(tb.exec("COMMIT"));
  ta.exec("COMMIT");
  // Both marks committed; the watermark covers both inserts.
  auto w = db::backfill_watermark(conn(), c);
  ASSERT_TRUE(w.has_value());
  EXPECT_GE(*w, a_mark);
  EXPECT_GT(*w, *earlier);
  EXPECT_EQ(all_rows(c), 3);
}

// An import at REPEATABLE READ whose snapshot still shows a mark another
// writer has since replaced: it adds its mark and deletes nothing (red with
// the delete at every level: "could not serialize access due to concurrent
// update").
TEST_F(HistoryBackfill, ARepeatableReadImportAfterAReplacedMarkDoesNotFail) {
  auto c = community();
  pqxx::nontransaction(conn()).exec(insert_sql(c, "first", 5000));
  auto first = db::backfill_watermark(conn(), c);
  ASSERT_TRUE(first.has_value());
  auto a = connect();
  pqxx::nontransaction ta(*a);
  ta.exec("BEGIN ISOLATION LEVEL REPEATABLE READ");
  ta.exec("SELECT 1");  // the snapshot, with the first mark in it
  ASSERT_TRUE(wait_past_late_marks(conn(), c));
  pqxx::nontransaction(conn()).exec(insert_sql(c, "replaces-it", 5000));
  EXPECT_NO_THROW(ta.exec(insert_sql(c, "import", 5000)));
  EXPECT_NO_THROW(ta.exec("COMMIT"));
  EXPECT_EQ(all_rows(c), 3);
  auto w = db::backfill_watermark(conn(), c);
  ASSERT_TRUE(w.has_value());
  EXPECT_GT(*w, *first);
}

// A rolled-back late insert takes its mark and its deletes with it: the
// committed mark it would have replaced is still there.
TEST_F(HistoryBackfill, ARolledBackMarkLeavesTheOlderOne) {
  auto c = community();
  pqxx::nontransaction(conn()).exec(insert_sql(c, "late-1", 5000));
  auto first = db::backfill_watermark(conn(), c);
  ASSERT_TRUE(first.has_value());
  ASSERT_TRUE(wait_past_late_marks(conn(), c));
  {
    pqxx::nontransaction tx(conn());
    tx.exec("BEGIN");
    tx.exec(insert_sql(c, "late-2", 5000));
    tx.exec("ROLLBACK");
  }
  auto w = db::backfill_watermark(conn(), c);
  ASSERT_TRUE(w.has_value());
  EXPECT_EQ(*w, *first);
}

// A bulk import of late rows: one statement, many rows, a mark or two.
TEST_F(HistoryBackfill, ABulkImportWritesAboutOneMarkASecond) {
  auto c = community();
  double before = db_now(conn());
  pqxx::nontransaction(conn()).exec(
    "INSERT INTO events (community_id, id, pubkey, created_at, kind, raw) SELECT " +
    std::to_string(c) + ", sha256(('bulk' || i)::text::bytea), sha256('seeder'::bytea), " +
    "1700000000 + i, 1, '{}' FROM generate_series(1, 20000) AS i");
  double took = db_now(conn()) - before;
  EXPECT_EQ(all_rows(c), 20000);
  EXPECT_LE(marks(c), static_cast<int>(took) + 2) << "took " << took << " s";
  auto w = db::backfill_watermark(conn(), c);
  ASSERT_TRUE(w.has_value());
  EXPECT_GE(*w, before + took - 1.0);  // at or after the last row's insert
}

}  // namespace
}  // namespace waggle::pgtest
