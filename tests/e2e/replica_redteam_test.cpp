// Red team of issue 17's replica routing (docs/replicas.md), against the
// streaming standby that ./scripts/test starts. Each test is a concrete
// interleaving that broke one of the claims on the code it was written
// against (core17 da52f7b), and says which fix turned it green.
//
// 1. Claim 1 (covered pages miss nothing committed before the access check):
//    a session whose track_activities is off (a superuser's SET, or ALTER
//    ROLE/DATABASE ... SET by one) publishes no xact_start and shows state
//    'disabled' and an empty query. The probe's filter
//    (xact_start IS NOT NULL OR query = '<insufficient privilege>') drops
//    it, and `provable` only reads the PROBER's own track_activities. An
//    on-time row that session inserted before the probe and committed after
//    the token is missing from a replica/covered page.
// 2. Claim 4 (a replica failure mid-read gives the writer's whole page, never
//    a client-visible error): run_routed takes every 57014 on a replica for
//    "the read is too wide, the writer would spend as long". A replica whose
//    replay is behind the primary's end of a DDL transaction still holds the
//    replayed AccessExclusiveLock on `events`: the page's statement waits on
//    it until the replica's statement_timeout, and the client gets "error:
//    query took too long" although the writer answers at once.
// 3. Same claim: a DBA's pg_cancel_backend on the standby (57014 "canceling
//    statement due to user request") is answered the same way.
// 4. Claim 3 (no replica passes validation with the old epoch after a token
//    regression): the prober checks tokens only within one epoch. A writer
//    restored from a backup taken before an earlier rotation comes back with
//    the OLD epoch and an older token; the ring sees "epoch changed", keeps
//    the new entries, and a replica still showing the old history at a higher
//    token validates against them.
//
// Red checks as run (core17 da52f7b): all four fail. Fixed since, and each
// test now guards its fix: the probe counts state = 'disabled' as hidden (1);
// every replica error, a 57014 and a spent budget included, is read again on
// the writer as replica_error (2, 3); the prober rotates when the epoch
// changes to one whose token is at most its highest (4). The code without
// these fixes is the red check: all four failed on it.

#include <atomic>
#include <chrono>
#include <cstdio>
#include <string>
#include <thread>

#include <gtest/gtest.h>
#include <pqxx/pqxx>

#include "actors/reads/heartbeat_prober.hpp"
#include "tests/e2e/replica_route_fixture.hpp"

namespace waggle {
namespace {

using namespace std::chrono_literals;
using namespace replica_test;

class replica_redteam : public replica_test::replica_route_fixture {
 protected:
  replica_redteam() : replica_route_fixture("redteam") {}

  // The prober goes on while the standby lags: fresh proofs in the ring,
  // which the lagging standby does not show (its token proves the older one).
  void probe_only() {
    auto sampled = ring_entry::clock::now();
    auto p = db::probe_heartbeat(*writer_);
    ASSERT_TRUE(p.provable);
    ring_->push(p.epoch, ring_entry{p.token, p.fence_raw, p.floor_secs, sampled});
  }

  // The primary holds an AccessExclusiveLock on events (a migration's DDL, a
  // TRUNCATE of another table in the same transaction, a LOCK) until the
  // standby has replayed the lock record; then replay stops (lag: a replay
  // conflict waiting out max_standby_streaming_delay, a slow disk, or here a
  // pause) and the primary's transaction ends. The primary no longer holds
  // the lock; the standby's startup process does until replay moves on.
  void replica_holds_a_lock_the_writer_released() {
    auto ddl = db_->connect();
    {
      pqxx::work tx(*ddl);
      tx.exec("LOCK TABLE events IN ACCESS EXCLUSIVE MODE");
      auto standby_db = standby::url_for(db_->name());
      // The LOCK's WAL record waits in a partly filled page: the WAL writer
      // flushes only whole pages unless a commit asks for more, and the
      // walsender ships only flushed WAL. On a busy run another test's commit
      // flushed it; alone, nothing did. A commit of our own flushes it.
      auto flusher = db_->connect();
      bool seen = false;
      for (int i = 0; i < 500 && !seen; ++i) {
        pqxx::nontransaction(*flusher).exec("SELECT txid_current()");
        pqxx::connection s(standby_db);
        pqxx::nontransaction q(s);
        seen = q.exec("SELECT 1 FROM pg_locks WHERE relation = 'events'::regclass"
                      " AND mode = 'AccessExclusiveLock' AND granted").size() == 1;
        if (!seen)
          std::this_thread::sleep_for(20ms);
      }
      ASSERT_TRUE(seen) << "the standby never replayed the lock";
      ASSERT_TRUE(standby::pause_replay());
      tx.commit();
    }
    // The writer reads events at once again.
    pqxx::nontransaction w(*writer_);
    w.exec("SET lock_timeout = 200");
    EXPECT_EQ(w.exec("SELECT count(*) FROM events").at(0).at(0).as<int>(), rows);
    w.exec("RESET lock_timeout");
  }
};

// Finding 1 (claim 1). Interleaving:
//   X (track_activities off): BEGIN; INSERT an on-time row r at t
//   probe of T at S > t + 2: X's row in pg_stat_activity has no xact_start
//     (state 'disabled'), so fence_raw = S, provable = true
//   the standby replays T, then falls behind (here: replay paused)
//   X: COMMIT           -- r is committed on the writer
//   a REQ with until = created_at(r) < fence_wall(T): access check on the
//   writer (after X's commit), replica/covered, r is missing from the page.
// Green once the probe counts a backend with state = 'disabled' (or
// xact_start NULL and state <> 'idle') as one it cannot see (provable =
// false), as it already does for '<insufficient privilege>'.
TEST_F(replica_redteam, AnOnTimeRowOfASessionWithTrackActivitiesOffIsOnTheCoveredPage) {
  standby::restore_on_exit restore;
  auto setup = db_->connect();
  auto other = db::add_community(*setup, "hidden.test", "Hidden", community_policy::open);
  ASSERT_TRUE(other.has_value());
  const int64_t hidden_community = other->id;

  // A superuser's import session (the test cluster's role is one), or any
  // role an administrator gave `track_activities = off`.
  auto x = db_->connect();
  pqxx::nontransaction xs(*x);
  xs.exec("SET track_activities = off");
  xs.exec("BEGIN");
  // On time by the trigger's own clock with a second to spare: never late.
  auto created = xs.exec(
    "INSERT INTO events (community_id, id, pubkey, created_at, kind, raw) VALUES (" +
    std::to_string(hidden_community) + ", sha256('hidden'::bytea), sha256('author'::bytea), "
    "floor(extract(epoch FROM clock_timestamp()))::bigint - 958, 1, '{\"hidden\":true}') "
    "RETURNING created_at").at(0).at(0).as<int64_t>();
  {
    pqxx::nontransaction q(*setup);
    auto act = q.exec_params("SELECT state, xact_start IS NULL FROM pg_stat_activity WHERE pid = $1",
                             x->backendpid());
    ASSERT_EQ(act.size(), 1u);
    std::printf("[ observed ] the open inserting session shows state=%s xact_start_null=%s\n",
                act[0][0].c_str(), act[0][1].c_str());
  }
  // Until the database clock is past created_at + F + 1 (about 3 s).
  for (int i = 0; i < 100; ++i) {
    pqxx::nontransaction q(*setup);
    if (q.exec("SELECT extract(epoch FROM clock_timestamp()) > " + std::to_string(created + 961))
          .at(0).at(0).as<bool>())
      break;
    std::this_thread::sleep_for(100ms);
  }
  prove(false);  // the open hidden transaction makes the probe unprovable: no proof
  ASSERT_LT(static_cast<double>(created), fence_wall_);
  ASSERT_TRUE(standby::pause_replay());
  xs.exec("COMMIT");
  {
    pqxx::nontransaction q(*setup);
    // Committed on the writer, and on time (no watermark for the community).
    ASSERT_EQ(q.exec("SELECT count(*) FROM events WHERE id = sha256('hidden'::bytea)")
                .at(0).at(0).as<int>(), 1);
    ASSERT_EQ(q.exec("SELECT count(*) FROM history_backfill WHERE community_id = " +
                     std::to_string(hidden_community)).at(0).at(0).as<int>(), 0);
  }
  auto req = read_until(hidden_community, created);

  // The writer's page has the row.
  auto w = read(req, nullptr);
  ASSERT_TRUE(w.answered);
  ASSERT_TRUE(w.reply.err.ok()) << w.reply.err.message();
  ASSERT_EQ(w.reply.raws.size(), 1u);

  auto a = read(req);
  ASSERT_TRUE(a.answered);
  ASSERT_TRUE(a.reply.err.ok()) << a.reply.err.message();
  std::printf("[ observed ] routed page: %zu rows, replica/covered=%llu\n", a.reply.raws.size(),
              static_cast<unsigned long long>(decisions(replica_covered)));
  EXPECT_EQ(a.reply.raws.size(), 1u) << "the covered page misses a row committed before the read";
}

// Finding 2 (claim 4). The standby holds a replayed AccessExclusiveLock the
// primary has released; the page's statement waits for it on the replica
// until statement_timeout, and the 57014 reaches the client.
// Green once a replica 57014 is re-read on the writer (replica_error) unless
// the budget really is spent (e.g. compare the budget's remaining time, or
// the message "canceling statement due to statement timeout" AND a read that
// was running, not waiting on a lock), or the replica session sets a
// lock_timeout below the budget and 55P03 is a replica_error.
TEST_F(replica_redteam, AReplayedLockTheWriterReleasedIsAnsweredFromTheWriter) {
  standby::restore_on_exit restore;
  prove();
  replica_holds_a_lock_the_writer_released();
  probe_only();
  auto req = read_until(community_, now_ - 2000);
  auto a = read(req);
  ASSERT_TRUE(a.answered);
  std::printf("[ observed ] after %.3f s: err=\"%s\", %zu rows; writer/replica_error=%llu "
              "replica/covered=%llu\n",
              a.seconds, a.reply.err.ok() ? "" : a.reply.err.message().c_str(),
              a.reply.raws.size(),
              static_cast<unsigned long long>(decisions(writer_replica_error)),
              static_cast<unsigned long long>(decisions(replica_covered)));
  EXPECT_TRUE(a.reply.err.ok()) << a.reply.err.message();
  EXPECT_EQ(a.reply.raws.size(), 50u);
}

// Finding 3 (claim 4): the same wait, ended by an operator's
// pg_cancel_backend on the standby: "canceling statement due to user
// request" is 57014 too, and the client is told its read was too wide.
TEST_F(replica_redteam, AnOperatorsCancelOnTheStandbyIsAnsweredFromTheWriter) {
  standby::restore_on_exit restore;
  prove();
  replica_holds_a_lock_the_writer_released();
  probe_only();
  std::atomic<bool> cancelled{false};
  std::thread dba([&] {
    auto standby_db = standby::url_for(db_->name());
    for (int i = 0; i < 200 && !cancelled; ++i) {
      try {
        pqxx::connection s(standby_db);
        pqxx::nontransaction q(s);
        auto r = q.exec("SELECT pg_cancel_backend(pid) FROM pg_stat_activity"
                        " WHERE application_name = 'waggle-reader-0' AND wait_event_type = 'Lock'");
        if (!r.empty() && r[0][0].as<bool>())
          cancelled = true;
      } catch (const std::exception&) {
      }
      std::this_thread::sleep_for(10ms);
    }
  });
  auto a = read(read_until(community_, now_ - 2000));
  dba.join();
  ASSERT_TRUE(cancelled) << "the replica read never waited on the lock";
  ASSERT_TRUE(a.answered);
  std::printf("[ observed ] after %.3f s: err=\"%s\", %zu rows\n", a.seconds,
              a.reply.err.ok() ? "" : a.reply.err.message().c_str(), a.reply.raws.size());
  EXPECT_TRUE(a.reply.err.ok()) << a.reply.err.message();
  EXPECT_EQ(a.reply.raws.size(), 50u);
}

// Finding 4 (claim 3). Interleaving, on the one heartbeat row:
//   epoch E1: the prober sees 5001. (A backup B is taken around token 4000;
//     a standby R keeps following this history to 5001 and beyond.)
//   failover to a standby at 4500 (E1): 4501 <= 5001, regression, the
//     prober rotates: E2, 5002; it probes on: E2 5003.
//   the operator restores B (E1, token 4000): the probe sees E1 4001. The
//     ring says epoch_changed and starts over in E1; no rotation.
//   R (E1, 5001) validates: proof_for(5001) = the entry 4001 of the restored
//     history, and R lacks every commit made on it. Covered reads on R miss
//     the restored writer's new rows once they are below the fence wall.
// Green once a new epoch whose token is at most the highest token this
// prober has seen is handled as a regression (rotate): a rotation by any node
// always sets token = greatest(token, highest) + 1, above every token of the
// history it rotated, so only a history that went back shows an older token.
TEST_F(replica_redteam, AnOldEpochRestoredWithAnOlderTokenIsRotatedAndItsReplicasFail) {
  pqxx::connection admin(db_->url());
  auto exec = [&](const std::string& sql) {
    pqxx::nontransaction tx(admin);
    return tx.exec(sql);
  };
  const auto e1 = exec("SELECT epoch FROM replica_heartbeat").at(0).at(0).as<std::string>();
  exec("UPDATE replica_heartbeat SET token = 5000");
  auto ring = std::make_shared<heartbeat_ring>();
  heartbeat_prober_state prober;
  prober.init(nullptr, db_->url(), ring, node_env::production(), caf::timespan{0});
  prober.on_tick();
  ASSERT_EQ(ring->snapshot()->newest()->token, 5001);

  exec("UPDATE replica_heartbeat SET token = 4500");  // failover to a standby behind
  prober.on_tick();                                   // regression: rotation
  const auto e2 = exec("SELECT epoch FROM replica_heartbeat").at(0).at(0).as<std::string>();
  ASSERT_NE(e1, e2);
  prober.on_tick();
  ASSERT_EQ(ring->snapshot()->epoch, e2);

  // Restore of a backup taken before the rotation.
  exec("UPDATE replica_heartbeat SET epoch = '" + e1 + "', token = 4000");
  prober.on_tick();
  auto snap = ring->snapshot();
  std::printf("[ observed ] after the restore: ring epoch %s (old epoch: %s), newest token "
              "%lld, highest token seen %lld\n",
              snap->epoch.c_str(), e1.c_str(),
              static_cast<long long>(snap->newest() ? snap->newest()->token : -1),
              static_cast<long long>(prober.highest_token));

  // The replica that followed the old history past the backup point.
  db::heartbeat_seen seen{5001, e1, db::embedded_migrations().back().version};
  route_settings settings;
  settings.schema_version = seen.schema_version;
  read_shape shape;
  shape.upper = now_ - 5000;  // far below any fence wall
  auto d = judge(*snap, &seen, shape, settings, ring_entry::clock::now(), std::nullopt);
  std::printf("[ observed ] the old history's replica: %s/%s\n", d.replica ? "replica" : "writer",
              std::string(to_string(d.reason)).c_str());
  EXPECT_FALSE(d.replica) << "a replica of the old epoch's history validated after the "
                             "token went back";
}

}  // namespace
}  // namespace waggle
