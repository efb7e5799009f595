// Batch retry and bisection (db/batch_bisect.hpp): a poison event is rejected
// alone, a deadlock is retried, a lost connection fails every item unanswered.

#include <thread>

#include "tests/db/write_fixture.hpp"

namespace waggle::pgtest {
namespace {

TEST_F(WriteTest, PoisonEventIsRejectedAloneByBisection) {
  auto c = community();
  std::vector<proto::event> evs;
  for (int i = 0; i < 7; ++i)
    evs.push_back(make_event(40, 1, 1000 + i, {{"t", "fine"}}, "event " + std::to_string(i)));
  // NIP-01 allows \u0000 in a tag value; PostgreSQL text cannot hold it
  // (SQLSTATE 22021), and the tag index stores first values as text.
  evs[4] = make_event(40, 1, 2000, {{"t", std::string("bad\0value", 9)}}, "poison");
  // Within a plain write_batch the whole transaction fails...
  EXPECT_THROW(db::write_batch(conn(), batch(c, evs)), pqxx::data_exception);
  EXPECT_EQ(all_rows(c), 0);
  // ...and the bisecting wrapper rejects only the poison.
  auto r = db::write_batch_bisecting(conn(), batch(c, evs));
  ASSERT_EQ(r.size(), evs.size());
  for (size_t i = 0; i < evs.size(); ++i) {
    if (i == 4) {
      EXPECT_EQ(r[i].outcome, write_outcome::rejected);
      EXPECT_NE(r[i].reason.find("class 22"), std::string::npos) << r[i].reason;
      EXPECT_EQ(r[i].reason.find("INSERT"), std::string::npos) << "SQL leaked: " << r[i].reason;
      EXPECT_EQ(r[i].reason.find("UTF8"), std::string::npos) << "internals leaked: " << r[i].reason;
    } else {
      EXPECT_EQ(r[i].outcome, write_outcome::stored) << i;
    }
  }
  EXPECT_EQ(all_rows(c), 6);
  EXPECT_FALSE(exists(c, evs[4].id));
}

TEST_F(WriteTest, PoisonDTagAndInvalidUtf8AreIsolated) {
  auto c = community();
  auto ok1 = make_event(41, 1, 1000);
  auto bad_d = make_event(41, 30023, 1000, {{"d", std::string("a\0b", 3)}});
  auto ok2 = make_event(42, 30023, 1000, {{"d", "fine"}});
  auto bad_utf8 = make_event(41, 1, 1001, {{"x", "\xff\xfe"}});
  auto r = db::write_batch_bisecting(conn(), batch(c, {ok1, bad_d, ok2, bad_utf8}));
  EXPECT_EQ(r[0].outcome, write_outcome::stored);
  EXPECT_EQ(r[1].outcome, write_outcome::rejected);
  EXPECT_EQ(r[2].outcome, write_outcome::stored);
  EXPECT_EQ(r[3].outcome, write_outcome::rejected);
  EXPECT_EQ(all_rows(c), 2);
}

TEST_F(WriteTest, BrokenConnectionFailsEveryItemAndRethrows) {
  auto c = community();
  auto ev1 = make_event(43, 30002, 1000, {{"d", "x"}});
  auto ev2 = make_event(43, 1, 1000);
  // Hold ev1's coordinate so the batch is inside its transaction, then kill it.
  auto holder = connect();
  pqxx::work hold(*holder);
  hold.exec_params("SELECT pg_advisory_xact_lock(hashtextextended($1, 0))",
                   db::replacement_lock_key(c, 30002, ev1.pubkey, "x"));
  auto writer = connect();
  int pid = writer->backendpid();
  std::vector<write_result> results;
  bool caught_broken = false, caught_typed = false;
  std::thread t([&] {
    try {
      db::write_batch_bisecting(*writer, batch(c, {ev1, ev2}));
    } catch (const db::batch_unavailable& e) {
      caught_typed = true;
      results = e.results();
      try {
        throw;
      } catch (const pqxx::broken_connection&) {
        caught_broken = true;
      }
    } catch (...) {
    }
  });
  // (No ASSERT while the thread runs: it must be joined on every path.)
  bool waited = eventually([&] { return waits_on_advisory_lock(conn(), pid); });
  {
    pqxx::nontransaction tx(conn());
    tx.exec_params("SELECT pg_terminate_backend($1)", pid);
  }
  t.join();
  hold.commit();
  ASSERT_TRUE(waited) << "the batch never waited inside its transaction";
  EXPECT_TRUE(caught_typed);
  EXPECT_TRUE(caught_broken) << "batch_unavailable must be a pqxx::broken_connection";
  ASSERT_EQ(results.size(), 2u);
  for (const auto& r : results) {
    EXPECT_EQ(r.outcome, write_outcome::failed);
    EXPECT_EQ(r.reason, "database unavailable");
  }
  EXPECT_EQ(all_rows(c), 0);
}

// A deadlock (40P01) aborts the batch's transaction; the same batch is retried
// and then succeeds. Deterministic: the holder takes the coordinate key that
// sorts second, waits until the batch holds the first and waits for the
// second, then asks for the first. Only the batch's session runs deadlock
// detection early (the holder's deadlock_timeout is long), so the batch is
// the victim.
TEST_F(WriteTest, DeadlockIsRetried) {
  auto c = community();
  auto ev1 = make_event(44, 30003, 1000, {{"d", "one"}});
  auto ev2 = make_event(44, 30003, 1000, {{"d", "two"}});
  auto k1 = db::replacement_lock_key(c, 30003, ev1.pubkey, "one");
  auto k2 = db::replacement_lock_key(c, 30003, ev2.pubkey, "two");
  {
    pqxx::nontransaction tx(conn());
    auto h1 = tx.exec_params("SELECT hashtextextended($1, 0)", k1)[0][0].as<int64_t>();
    auto h2 = tx.exec_params("SELECT hashtextextended($1, 0)", k2)[0][0].as<int64_t>();
    if (h2 < h1)
      std::swap(k1, k2);  // k1 is now the key the batch takes first
  }
  auto holder = connect();
  {
    pqxx::nontransaction tx(*holder);
    tx.exec("SET deadlock_timeout = '30s'");
  }
  pqxx::work hold(*holder);
  hold.exec_params("SELECT pg_advisory_xact_lock(hashtextextended($1, 0))", k2);
  auto writer = connect();
  {
    pqxx::nontransaction tx(*writer);
    tx.exec("SET deadlock_timeout = '100ms'");
  }
  int pid = writer->backendpid();
  std::vector<write_result> results;
  std::string err;
  std::thread t([&] {
    try {
      results = db::write_batch_bisecting(*writer, batch(c, {ev1, ev2}));
    } catch (const std::exception& e) {
      err = e.what();
    }
  });
  // (No ASSERT while the thread runs: it must be joined on every path.)
  bool first_wait = eventually([&] { return waits_on_advisory_lock(conn(), pid); });
  // Now ask for k1, which the batch holds: a cycle; the batch is aborted,
  // which grants k1 here; the retry waits for this transaction to end.
  hold.exec_params("SELECT pg_advisory_xact_lock(hashtextextended($1, 0))", k1);
  bool retry_wait = eventually([&] { return waits_on_advisory_lock(conn(), pid); },
                               std::chrono::seconds(3));
  hold.commit();
  t.join();
  EXPECT_TRUE(first_wait) << "the batch did not wait for the second key";
  EXPECT_TRUE(retry_wait) << "the retry did not queue behind the holder";
  ASSERT_TRUE(err.empty()) << err;
  ASSERT_EQ(results.size(), 2u);
  EXPECT_EQ(results[0].outcome, write_outcome::stored) << results[0].reason;
  EXPECT_EQ(results[1].outcome, write_outcome::stored) << results[1].reason;
  EXPECT_EQ(live_rows(c), 2);
}

}  // namespace
}  // namespace waggle::pgtest

namespace waggle::pgtest {
namespace {

// Red-team finding: a d tag too large for the coordinate index raises
// SQLSTATE 54000 (program limit exceeded). It must be isolated by bisection
// like classes 22/23, or one member could fail every batch their events join.
TEST(WriteLimits, AnOversizedDTagIsRejectedAloneNotItsWholeBatch) {
  auto& s = shared_db::get();
  ASSERT_TRUE(s.error.empty()) << s.error;
  auto conn = s.db->connect();
  auto c = db::add_community(*conn, "oversized-d.test", "", community_policy::open);
  ASSERT_TRUE(c.has_value());
  std::string big;
  uint32_t x = 12345;
  for (int i = 0; i < 6000; ++i) {  // incompressible, so TOAST cannot shrink it under the limit
    x = x * 1103515245u + 12345u;
    big.push_back(static_cast<char>('!' + (x >> 16) % 90));
  }
  auto g1 = make_event(90, 1, 1000, {}, "good 1");
  auto g2 = make_event(91, 1, 1000, {}, "good 2");
  auto bad = make_event(92, 30000, 1000, {{"d", big}}, "huge d");
  auto r = db::write_batch_bisecting(*conn, batch(c->id, {g1, g2, bad}));
  ASSERT_EQ(r.size(), 3u);
  EXPECT_EQ(r[0].outcome, write_outcome::stored);
  EXPECT_EQ(r[1].outcome, write_outcome::stored);
  EXPECT_EQ(r[2].outcome, write_outcome::rejected);
  EXPECT_NE(r[2].reason.find("class 54"), std::string::npos) << r[2].reason;
}

}  // namespace
}  // namespace waggle::pgtest
