// The one-statement write (db/event_write.cpp, write_batch): a batch of plain
// events (no coordinate, channel, deletion, mention or push kind) is S1 and
// S3 in ONE prepared statement outside an explicit transaction. What it
// keeps: values are bind parameters, never SQL text; a concurrent insert of
// the same id is still a duplicate; a connection lost under it answers every
// item "database unavailable" and stores nothing; its prepared statement is
// registered again on a new connection.
// (Bisection of a poison event in a plain batch: event_write_test.cpp,
// PoisonEventIsRejectedAloneByBisection, whose batch is plain.)

#include <thread>

#include "db/session.hpp"
#include "db/statistics.hpp"
#include "tests/db/write_fixture.hpp"

namespace waggle::pgtest {
namespace {

struct activity {
  std::string query;      // the first track_activity_query_size bytes (1 kB)
  bool waits_on_lock = false;
};

std::optional<activity> activity_of(pqxx::connection& observer, int pid) {
  pqxx::nontransaction tx(observer);
  auto r = tx.exec_params(
    "SELECT query, coalesce(wait_event_type = 'Lock', false) "
    "  FROM pg_stat_activity WHERE pid = $1 AND state = 'active'",
    pid);
  if (r.empty())
    return std::nullopt;
  return activity{r[0][0].as<std::string>(), r[0][1].as<bool>()};
}

// `ev` inserted, not committed, by another transaction: a writer of the same
// id waits inside its statement (ON CONFLICT waits for that transaction).
class OneStatementWrite : public WriteTest {
 protected:
  void hold(int64_t c, const proto::event& ev) {
    holder_ = connect();
    held_.emplace(*holder_);
    auto r = db::write_events(*held_, batch(c, {ev}));
    ASSERT_EQ(r.at(0).outcome, write_outcome::stored);
  }
  std::unique_ptr<pqxx::connection> holder_;
  std::optional<pqxx::work> held_;
};

TEST_F(OneStatementWrite, IsOnePreparedStatementWithValuesAsParameters) {
  auto c = community();
  const std::string content = "a-very-recognisable-content-7f3a";
  auto ev = make_event(60, 1, 1000, {{"t", "marker-tag-value-91c2"}}, content);
  auto other = make_event(61, 1, 1000, {}, "other");
  hold(c, ev);
  // As a writer session (its settings), after a first batch.
  auto writer = connect();
  for (const auto& setting : db::writer_session_settings())
    pqxx::nontransaction{*writer}.exec(setting);
  ASSERT_EQ(db::write_batch(*writer, batch(c, {make_event(59, 1, 1000)})).at(0).outcome,
            write_outcome::stored);
  int pid = writer->backendpid();
  std::vector<write_result> results;
  std::string err;
  std::thread t([&] {
    try {
      results = db::write_batch_bisecting(*writer, batch(c, {other, ev}));
    } catch (const std::exception& e) {
      err = e.what();
    }
  });
  // (No ASSERT while the thread runs: it must be joined on every path.)
  std::optional<activity> seen;
  bool waited = eventually([&] {
    seen = activity_of(conn(), pid);
    return seen && seen->waits_on_lock;
  });
  held_->commit();
  t.join();
  ASSERT_TRUE(waited) << "the writer never waited for the conflicting insert";
  ASSERT_TRUE(err.empty()) << err;
  // One statement, the prepared check-and-insert: what ran is (a prefix of,
  // pg_stat_activity keeps 1 kB) its text, which holds both.
  std::string prepared;
  {
    pqxx::nontransaction tx(*writer);
    auto r = tx.exec("SELECT statement FROM pg_prepared_statements "
                     "WHERE name = 'waggle_ev_check_insert'");
    ASSERT_EQ(r.size(), 1u) << "the batch did not use the one-statement write";
    prepared = r[0][0].as<std::string>();
  }
  EXPECT_EQ(prepared.rfind(seen->query, 0), 0u) << "not the prepared statement: " << seen->query;
  EXPECT_NE(prepared.find("chk AS"), std::string::npos);
  EXPECT_NE(prepared.find("INSERT INTO events"), std::string::npos);
  // Values are parameters: nothing of either event is in the SQL text.
  EXPECT_NE(prepared.find("$17"), std::string::npos);
  for (const auto& value : {content, std::string("marker-tag-value-91c2"), ev.id, ev.pubkey,
                            other.id, other.pubkey})
    for (const auto* text : {&seen->query, &prepared})
      EXPECT_EQ(text->find(value), std::string::npos) << "value in SQL text: " << value;
  // The holder's insert committed first: the writer's is a duplicate, the
  // other event stored.
  ASSERT_EQ(results.size(), 2u);
  EXPECT_EQ(results[0].outcome, write_outcome::stored) << results[0].reason;
  EXPECT_EQ(results[1].outcome, write_outcome::duplicate) << results[1].reason;
  EXPECT_EQ(all_rows(c), 3);
}

TEST_F(OneStatementWrite, AConflictThatRollsBackIsStoredByTheWriter) {
  auto c = community();
  auto ev = make_event(62, 1, 1000, {{"t", "x"}});
  hold(c, ev);
  auto writer = connect();
  int pid = writer->backendpid();
  std::vector<write_result> results;
  std::string err;
  std::thread t([&] {
    try {
      results = db::write_batch_bisecting(*writer, batch(c, {ev}));
    } catch (const std::exception& e) {
      err = e.what();
    }
  });
  bool waited = eventually([&] {
    auto a = activity_of(conn(), pid);
    return a && a->waits_on_lock;
  });
  held_->abort();
  t.join();
  ASSERT_TRUE(waited) << "the writer never waited for the conflicting insert";
  ASSERT_TRUE(err.empty()) << err;
  ASSERT_EQ(results.size(), 1u);
  EXPECT_EQ(results[0].outcome, write_outcome::stored) << results[0].reason;
  EXPECT_EQ(all_rows(c), 1);
  EXPECT_EQ(tag_rows(c, ev.id), 1);
}

TEST_F(OneStatementWrite, ALostConnectionAnswersEveryItemUnavailableAndStoresNothing) {
  auto c = community();
  auto ev = make_event(63, 1, 1000);
  auto other = make_event(64, 1, 1000);
  hold(c, ev);
  auto writer = connect();
  int pid = writer->backendpid();
  std::vector<write_result> results;
  bool unavailable = false;
  std::thread t([&] {
    try {
      db::write_batch_bisecting(*writer, batch(c, {other, ev}));
    } catch (const db::batch_unavailable& e) {
      unavailable = true;
      results = e.results();
    } catch (...) {
    }
  });
  bool waited = eventually([&] {
    auto a = activity_of(conn(), pid);
    return a && a->waits_on_lock;
  });
  {
    pqxx::nontransaction tx(conn());
    tx.exec_params("SELECT pg_terminate_backend($1)", pid);
  }
  t.join();
  held_->abort();
  ASSERT_TRUE(waited) << "the writer never waited for the conflicting insert";
  EXPECT_TRUE(unavailable);
  ASSERT_EQ(results.size(), 2u);
  for (const auto& r : results) {
    EXPECT_EQ(r.outcome, write_outcome::failed);
    EXPECT_EQ(r.reason, "database unavailable");
  }
  EXPECT_EQ(all_rows(c), 0) << "the statement was half applied";
}

// The writer sessions' connection (db::session, with the writers' setting):
// after the backend is gone, the next connection registers the prepared
// statement again and the next plain batch is stored.
TEST_F(OneStatementWrite, ThePreparedStatementSurvivesAReconnect) {
  auto c = community();
  db::session s(url(), "writer-test", db::writer_session_settings());
  auto* first = s.get();
  ASSERT_NE(first, nullptr);
  auto a = make_event(65, 1, 1000);
  EXPECT_EQ(db::write_batch_bisecting(*first, batch(c, {a})).at(0).outcome,
            write_outcome::stored);
  {
    pqxx::nontransaction tx(conn());
    tx.exec_params("SELECT pg_terminate_backend($1)", first->backendpid());
  }
  auto b = make_event(66, 1, 1000);
  EXPECT_THROW(db::write_batch_bisecting(*first, batch(c, {b})), db::batch_unavailable);
  s.reset();
  pqxx::connection* second = nullptr;
  ASSERT_TRUE(eventually([&] { return (second = s.get()) != nullptr; }));
  auto r = db::write_batch_bisecting(*second, batch(c, {b}));
  EXPECT_EQ(r.at(0).outcome, write_outcome::stored) << r.at(0).reason;
  EXPECT_EQ(all_rows(c), 2);
}

}  // namespace
}  // namespace waggle::pgtest
