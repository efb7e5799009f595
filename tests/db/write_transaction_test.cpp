// The ingest path's batch transaction (db/event_write.cpp, write_batch).
// Whatever a batch holds or however it fails, it must leave its connection
// outside any transaction block: a batch answered from inside a block still
// open would be lost with the connection, and the next one would run inside
// an aborted block. (Guards any change to how BEGIN and COMMIT are sent.)

#include "tests/db/write_fixture.hpp"

namespace waggle::pgtest {
namespace {

class WriteTransactionTest : public WriteTest {
 protected:
  void SetUp() override {
    WriteTest::SetUp();
    pid_ = pqxx::nontransaction{conn()}.exec1("SELECT pg_backend_pid()")[0].as<int>();
    observer_ = connect();
  }

  // The writer connection's state as the server reports it to another session.
  std::string writer_session_state() {
    pqxx::nontransaction tx{*observer_};
    return tx.exec1("SELECT state FROM pg_stat_activity WHERE pid = " + std::to_string(pid_))[0]
      .as<std::string>();
  }

  // Rows of `ids` that another session can see: committed ones.
  int64_t visible(int64_t c, const std::vector<proto::event>& evs) {
    pqxx::nontransaction tx{*observer_};
    int64_t n = 0;
    for (auto& ev : evs)
      n += tx.exec1("SELECT count(*) FROM events WHERE community_id = " + std::to_string(c) +
                    " AND id = decode(" + tx.quote(ev.id) + ", 'hex')")[0]
             .as<int64_t>();
    return n;
  }

  int pid_ = 0;
  std::unique_ptr<pqxx::connection> observer_;
};

TEST_F(WriteTransactionTest, PlainBatchIsCommittedAndNothingStaysOpen) {
  auto c = community();
  std::vector<proto::event> evs;
  for (int i = 0; i < 5; ++i)
    evs.push_back(make_event(60, 1, 1000 + i, {{"t", "x"}}, "plain " + std::to_string(i)));
  auto r = write(c, evs);
  for (auto& x : r)
    EXPECT_EQ(x.outcome, write_outcome::stored);
  EXPECT_EQ(writer_session_state(), "idle");
  EXPECT_EQ(visible(c, evs), 5);
  // Sent again: every one a duplicate, and still no block left open.
  for (auto& x : write(c, evs))
    EXPECT_EQ(x.outcome, write_outcome::duplicate);
  EXPECT_EQ(writer_session_state(), "idle");
}

TEST_F(WriteTransactionTest, BatchThatReplacesAHeadCommitsAfterItsAnswersAreChecked) {
  auto c = community();
  auto [low, high] = tie_pair(61, 10002, 1000);
  EXPECT_EQ(write1(c, high), write_outcome::stored);
  EXPECT_EQ(writer_session_state(), "idle");
  auto newer = make_event(61, 10002, 2000, {}, "newer");
  EXPECT_EQ(write1(c, newer), write_outcome::stored);
  EXPECT_EQ(writer_session_state(), "idle");
  EXPECT_TRUE(is_live(c, newer.id));
  EXPECT_FALSE(is_live(c, high.id));
  EXPECT_EQ(visible(c, {high, newer}), 2);
}

TEST_F(WriteTransactionTest, FailedBatchIsRolledBackAndTheConnectionWritesOn) {
  auto c = community();
  std::vector<proto::event> evs{make_event(62, 1, 1000, {}, "fine"),
                                make_event(62, 1, 1001, {{"t", std::string("bad\0", 4)}}, "poison")};
  EXPECT_THROW(db::write_batch(conn(), batch(c, evs)), pqxx::data_exception);
  EXPECT_EQ(writer_session_state(), "idle");  // not "idle in transaction (aborted)"
  EXPECT_EQ(visible(c, evs), 0);
  auto next = make_event(62, 1, 1002, {}, "next");
  EXPECT_EQ(write1(c, next), write_outcome::stored);
  EXPECT_EQ(writer_session_state(), "idle");
  EXPECT_EQ(visible(c, {next}), 1);
}

TEST_F(WriteTransactionTest, BatchWithNothingToWriteOpensNoTransaction) {
  auto c = community();
  auto ephemeral = make_event(63, 20001, 1000, {}, "ephemeral");
  EXPECT_EQ(write1(c, ephemeral), write_outcome::rejected);
  EXPECT_EQ(writer_session_state(), "idle");
}

}  // namespace
}  // namespace waggle::pgtest
