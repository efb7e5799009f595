// The time budget of one read across its statements (db/read_budget.hpp;
// issue 13, finding 4): statement_timeout is per statement, so a REQ of 10
// filters could take 10 times --read-statement-timeout-ms in the database.
// Against real PostgreSQL, with pg_sleep standing in for slow filters.

#include <chrono>
#include <thread>

#include <pqxx/except>
#include <pqxx/nontransaction>
#include <pqxx/transaction>

#include "db/group_store.hpp"
#include "db/membership_store.hpp"
#include "db/read_budget.hpp"
#include "messages/proto/filter.hpp"
#include "tests/support/pg_fixture.hpp"

namespace waggle::pgtest {
namespace {

using namespace std::chrono_literals;
using clock = db::read_budget::clock;

class ReadBudgetTest : public PgTest {
 protected:
  // As a reader session sets it: the session value is the budget.
  void session_timeout(std::chrono::milliseconds ms) {
    pqxx::nontransaction{conn()}.exec("SET statement_timeout = " + std::to_string(ms.count()));
  }
  // True if `fn` ended the way a read out of time ends: cancelled by the
  // statement_timeout the budget armed (57014), or stopped before a statement.
  template <class Fn>
  bool ran_out(Fn&& fn) {
    try {
      fn();
    } catch (const db::read_budget_spent&) {
      return true;
    } catch (const pqxx::sql_error& e) {
      return e.sqlstate() == "57014";
    }
    return false;
  }
};

TEST_F(ReadBudgetTest, statements_of_one_read_share_the_budget_across_transactions) {
  session_timeout(300ms);
  db::read_budget budget{300ms};
  int completed = 0;
  auto start = clock::now();
  // Six statements of 100 ms in two transactions: each alone is well inside
  // the 300 ms statement_timeout, together they are twice the budget.
  EXPECT_TRUE(ran_out([&] {
    for (int t = 0; t < 2; ++t) {
      pqxx::read_transaction tx(conn());
      for (int s = 0; s < 3; ++s) {
        budget.before_statement(tx);
        tx.exec("SELECT pg_sleep(0.1)");
        ++completed;
      }
      tx.commit();
    }
  }));
  auto took = clock::now() - start;
  EXPECT_LE(completed, 3);
  EXPECT_LT(took, 300ms + 150ms) << "the read as a whole ends near its budget";
  // The budget was SET LOCAL: the session value is back for the next read.
  pqxx::read_transaction tx(conn());
  EXPECT_EQ(tx.exec("SHOW statement_timeout")[0][0].as<std::string>(), "300ms");
}

TEST_F(ReadBudgetTest, a_fast_read_costs_no_extra_statement_and_none_is_left_unbounded) {
  db::read_budget budget{5000ms};
  pqxx::read_transaction tx(conn());
  budget.before_statement(tx);  // within the slack: the session value stands
  EXPECT_EQ(tx.exec("SHOW statement_timeout")[0][0].as<std::string>(), "0");
  db::read_budget late{5000ms, clock::now() - 4998ms};
  late.before_statement(tx);  // what is left, in whole ms: never 0 (which means none)
  auto shown = tx.exec("SHOW statement_timeout")[0][0].as<std::string>();
  EXPECT_TRUE(shown == "1ms" || shown == "2ms") << shown;
}

// The reader sessions run a read's statements outside a transaction
// (autocommit): there a SET LOCAL would end with the statement that made it,
// so the budget sets the session's value, and end() puts it back.
TEST_F(ReadBudgetTest, outside_a_transaction_the_budget_reaches_the_next_statement_and_end_restores_it) {
  session_timeout(300ms);
  db::read_budget budget{300ms, clock::now() - 200ms};  // past the slack, ~100 ms left
  {
    pqxx::nontransaction tx(conn());
    budget.before_statement(tx);
  }
  EXPECT_TRUE(budget.changed_session());
  {
    pqxx::nontransaction tx(conn());
    auto shown = tx.exec("SHOW statement_timeout")[0][0].as<std::string>();
    EXPECT_NE(shown, "300ms") << "the armed value must reach the read's next statement";
  }
  // And it bounds that statement: 200 ms is inside the session's 300 ms.
  EXPECT_TRUE(ran_out([&] { pqxx::nontransaction{conn()}.exec("SELECT pg_sleep(0.2)"); }));
  budget.end(conn());
  EXPECT_FALSE(budget.changed_session());
  pqxx::nontransaction tx(conn());
  EXPECT_EQ(tx.exec("SHOW statement_timeout")[0][0].as<std::string>(), "300ms")
    << "the next read starts from the session's own value";
}

// A search's ceiling (issue 34: a search must cost what its budget allows):
// the statement it arms runs at most the ceiling though the read has more
// left, and the read's next statement runs under what is left of the read,
// not under the ceiling the session still holds.
TEST_F(ReadBudgetTest, a_ceiling_bounds_its_statement_and_not_the_next) {
  session_timeout(5000ms);
  // Fresh, and the ceiling far below the 50 ms slack: the next statement
  // starts inside the slack, where an unarmed statement would inherit the
  // ceiling the session still holds.
  db::read_budget budget{5000ms};
  EXPECT_TRUE(ran_out([&] {
    pqxx::nontransaction tx(conn());
    budget.before_statement(tx, 10ms);
    tx.exec("SELECT pg_sleep(1)");
  })) << "the ceiling did not bound its statement";
  EXPECT_FALSE(ran_out([&] {
    pqxx::nontransaction tx(conn());
    budget.before_statement(tx);
    tx.exec("SELECT pg_sleep(0.3)");
  })) << "the next statement ran under the ceiling";
  budget.end(conn());
  pqxx::nontransaction tx(conn());
  EXPECT_EQ(tx.exec("SHOW statement_timeout")[0][0].as<std::string>(), "5s");
}

// Every read path of a reader session takes the budget: one that is spent
// ends the read before its next statement.
TEST_F(ReadBudgetTest, every_read_path_honours_a_spent_budget) {
  auto id = community("budget");
  std::vector<proto::filter> filters{*proto::parse_filter(R"({"kinds":[1]})", {}),
                                     *proto::parse_filter(R"({"kinds":[7]})", {})};
  auto spent = [] { return db::read_budget{300ms, clock::now() - 400ms}; };
  EXPECT_TRUE(ran_out([&] {
    auto b = spent();
    db::query_events(conn(), id, filters, {}, 0, &b);
  }));
  EXPECT_TRUE(ran_out([&] {
    auto b = spent();
    db::count_events(conn(), id, filters, 0, &b);
  }));
  EXPECT_TRUE(ran_out([&] {
    auto b = spent();
    db::read_community_access(conn(), id, {}, &b);
  }));
  EXPECT_TRUE(ran_out([&] {
    auto b = spent();
    db::read_channel_access(conn(), id, {"general"}, {}, &b);
  }));
  // Without a budget they run as before.
  EXPECT_TRUE(db::query_events(conn(), id, filters, {}, 0).empty());
}

}  // namespace
}  // namespace waggle::pgtest
