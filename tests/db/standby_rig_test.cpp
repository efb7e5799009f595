// The replica tests' rig (docs/testing.md, "The standby"): WAGGLE_TEST_STANDBY_URL is a hot
// standby streaming from the test primary over loopback, and the helpers of
// tests/support/standby.hpp do what they say: wait_replayed makes a committed row visible there,
// pause_replay keeps a shipped row invisible, ./scripts/pg stops and starts it, and a recovery
// conflict cancels a standby read within max_standby_streaming_delay instead of stalling replay.
//
// Red checks, run: the standby's primary_conninfo pointed at a closed port (running, not
// streaming): every test fails in SetUp, make_healthy() "the standby does not stream from the
// primary". pause_replay() made a no-op: PausedReplayHidesAShippedRowUntilResumed fails (state
// "not paused", the row visible). ALTER SYSTEM SET max_standby_streaming_delay = -1 on the
// standby: ARecoveryConflictCancelsAStandbyRead fails (replay waits behind the standby
// transaction; wait_replayed times out at 10 s).

#include <pqxx/pqxx>

#include "tests/support/pg_fixture.hpp"
#include "tests/support/standby.hpp"

namespace waggle {
namespace {

using namespace std::chrono_literals;

class StandbyRig : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(standby::configured());
    ASSERT_TRUE(standby::make_healthy());
    db_ = std::make_unique<pgtest::scratch_database>("standby_rig");
    auto c = db_->connect();
    pqxx::nontransaction tx(*c);
    tx.exec("CREATE TABLE rig (id int PRIMARY KEY, note text)");
  }

  void insert(int id) {
    auto c = db_->connect();
    pqxx::work tx(*c);
    tx.exec_params("INSERT INTO rig VALUES ($1, 'row')", id);
    tx.commit();
  }
  // -1: the row is absent; 1: present; 0: the standby could not answer (the failure says why).
  int on_standby(int id) {
    try {
      pqxx::connection c(standby::url_for(db_->name()));
      pqxx::nontransaction tx(c);
      return tx.exec_params("SELECT 1 FROM rig WHERE id = $1", id).empty() ? -1 : 1;
    } catch (const std::exception& e) {
      ADD_FAILURE() << "standby read failed: " << e.what();
      return 0;
    }
  }

  standby::restore_on_exit restore_;  // destroyed after db_: the standby is put back last
  std::unique_ptr<pgtest::scratch_database> db_;
};

TEST_F(StandbyRig, IsAStreamingStandbyOfTheTestPrimary) {
  pqxx::connection primary(standby::primary_url());
  pqxx::nontransaction tx(primary);
  auto rows = tx.exec(
    "SELECT application_name, host(client_addr), state FROM pg_stat_replication "
    "WHERE state = 'streaming'");
  ASSERT_EQ(rows.size(), 1u) << "pg_stat_replication on the primary has no (or several) "
                                "streaming standbys";
  EXPECT_EQ(std::string(rows[0][0].c_str()), "waggle_standby");
  EXPECT_EQ(std::string(rows[0][1].c_str()), "127.0.0.1");

  pqxx::connection s(standby::maintenance_url());
  pqxx::nontransaction stx(s);
  auto r = stx.exec(
    "SELECT pg_is_in_recovery(), (SELECT status || ' ' || sender_port FROM pg_stat_wal_receiver), "
    "current_setting('hot_standby'), current_setting('hot_standby_feedback'), "
    "current_setting('max_standby_streaming_delay'), inet_server_port()");
  EXPECT_TRUE(r[0][0].as<bool>());
  EXPECT_EQ(std::string(r[0][1].c_str()),
            "streaming " + std::to_string(standby::primary_port()));
  EXPECT_EQ(std::string(r[0][2].c_str()), "on");
  EXPECT_EQ(std::string(r[0][3].c_str()), "off");
  EXPECT_EQ(std::string(r[0][4].c_str()), "500ms");
  EXPECT_EQ(r[0][5].as<int>(), standby::port());
  EXPECT_NE(standby::port(), standby::primary_port());
}

TEST_F(StandbyRig, ACommittedRowIsOnTheStandbyOnceReplayed) {
  insert(1);
  ASSERT_TRUE(standby::wait_replayed(db_->url()));
  EXPECT_EQ(on_standby(1), 1);
}

TEST_F(StandbyRig, PausedReplayHidesAShippedRowUntilResumed) {
  ASSERT_TRUE(standby::wait_replayed(db_->url()));  // the table itself is there
  ASSERT_TRUE(standby::pause_replay());
  insert(2);
  // Shipped: the standby received the commit, and still does not show it.
  ASSERT_TRUE(standby::wait_received(db_->url()));
  EXPECT_EQ(standby::replay_state(), "paused");
  EXPECT_EQ(on_standby(2), -1) << "a row committed after pg_wal_replay_pause() is visible";
  ASSERT_TRUE(standby::resume_replay());
  ASSERT_TRUE(standby::wait_replayed(db_->url()));
  EXPECT_EQ(on_standby(2), 1);
}

TEST_F(StandbyRig, TheScriptStopsAndStartsIt) {
  ASSERT_TRUE(standby::stop_standby());
  EXPECT_FALSE(standby::accepts_connections());
  // The primary sees its standby go.
  EXPECT_TRUE(pgtest::eventually(
    [] {
      pqxx::connection c(standby::primary_url());
      pqxx::nontransaction tx(c);
      return tx.exec("SELECT 1 FROM pg_stat_replication").empty();
    },
    10s));
  insert(3);  // written while it is down: streamed once it is back
  ASSERT_TRUE(standby::start_standby());
  EXPECT_TRUE(standby::streaming());
  ASSERT_TRUE(standby::wait_replayed(db_->url()));
  EXPECT_EQ(on_standby(3), 1);
}

TEST_F(StandbyRig, ARecoveryConflictCancelsAStandbyRead) {
  {
    auto c = db_->connect();
    pqxx::nontransaction tx(*c);
    tx.exec("INSERT INTO rig SELECT g, 'doomed' FROM generate_series(100, 199) g");
  }
  ASSERT_TRUE(standby::wait_replayed(db_->url()));
  auto conflicts = [&] {
    pqxx::connection c(standby::maintenance_url());
    pqxx::nontransaction tx(c);
    return tx.exec_params("SELECT confl_snapshot FROM pg_stat_database_conflicts WHERE datname = $1",
                          db_->name())[0][0].as<int64_t>();
  };
  auto before = conflicts();
  // A standby read holding a snapshot that still sees the rows...
  pqxx::connection reader(standby::url_for(db_->name()));
  pqxx::transaction<pqxx::isolation_level::repeatable_read> read(reader, "rig-read");
  EXPECT_EQ(read.exec("SELECT count(*) FROM rig WHERE note = 'doomed'")[0][0].as<int>(), 100);
  // ...and a VACUUM on the primary that removes them (nothing tells it the standby needs them).
  {
    auto c = db_->connect();
    pqxx::nontransaction tx(*c);
    tx.exec("DELETE FROM rig WHERE note = 'doomed'");
    tx.exec("VACUUM rig");
  }
  // Replay cancels the read after max_standby_streaming_delay instead of waiting for it.
  ASSERT_TRUE(standby::wait_replayed(db_->url(), 10s));
  std::string error;
  try {
    read.exec("SELECT count(*) FROM rig");
  } catch (const std::exception& e) {
    error = e.what();
  }
  // An idle transaction in the way is ended with its session ("terminating connection due to
  // conflict with recovery"), which libpqxx reports as a lost connection; the standby counts it.
  EXPECT_FALSE(error.empty()) << "the standby read outlived the recovery conflict";
  EXPECT_EQ(conflicts(), before + 1);
}

}  // namespace
}  // namespace waggle
