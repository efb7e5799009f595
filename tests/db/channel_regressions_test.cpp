// Regressions from the independent red-team review of docs/channels.md. Each
// test forces the interleaving that broke a claim before its fix:
//
//  R1 (lock protocol): a 9005 on an EPHEMERAL channel and an ingest batch
//     deleting the same events. Both now lock event rows (in key order)
//     before the channel row that the TTL refresh locks; before, the 9005
//     locked the channel row first and the two deadlocked.
//  R2 (fence): a membership writer bypassing the relay now waits for the
//     membership lock (trigger on channel_members), and a roster whose own
//     transaction changes the members afterwards fails at COMMIT (the fence
//     runs again as a deferred constraint trigger).
//  R3 (fence): the fence compares the JSON clients read (kind, `d`, pubkey),
//     not only the row's columns.

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <ctime>
#include <mutex>
#include <optional>
#include <thread>

#include <pqxx/errorhandler>

#include "db/group_store.hpp"
#include "db/roster_fence.hpp"
#include "messages/proto/nip29.hpp"
#include "tests/db/channel_fixture.hpp"

namespace waggle::pgtest {
namespace {

namespace nip29 = proto::nip29;
using namespace std::chrono_literals;

std::string describe(const std::exception& e) {
  if (auto* s = dynamic_cast<const pqxx::sql_error*>(&e))
    return s->sqlstate() + ": " + e.what();
  return e.what();
}

class ChannelRegressionTest : public PgTest {
 protected:
  void make_channel(int64_t c, const std::string& ch, int owner, const std::vector<int>& members,
                    std::optional<int> ttl = std::nullopt) {
    std::vector<proto::tag> tags = {{"h", ch}, {"name", ch}};
    if (ttl)
      tags.push_back({"ttl", std::to_string(*ttl)});
    auto created = db::apply_group_command(conn(), c, ptr(command(owner, nip29::kind_create_group, tags)));
    ASSERT_EQ(created.result.outcome, write_outcome::stored) << created.result.reason;
    if (members.empty())
      return;
    std::vector<proto::tag> put = {{"h", ch}};
    for (int m : members)
      put.push_back({"p", pk(m), "member"});
    auto added = db::apply_group_command(conn(), c, ptr(command(owner, nip29::kind_put_user, put)));
    ASSERT_EQ(added.result.outcome, write_outcome::stored) << added.result.reason;
  }

  std::optional<std::string> live_roster_mismatch(int64_t c, const std::string& ch,
                                                  const std::string& relay_pk) {
    pqxx::nontransaction tx(conn());
    auto r = tx.exec_params(
      "SELECT waggle_roster_mismatch(community_id, d_tag, raw) FROM events "
      " WHERE community_id = $1 AND kind = 39002 AND d_tag = $2 AND pubkey = decode($3, 'hex') "
      "   AND deleted_at IS NULL",
      c, ch, relay_pk);
    if (r.empty())
      return std::string("no live 39002");
    if (r[0][0].is_null())
      return std::nullopt;
    return r[0][0].as<std::string>();
  }

  db::relay_signer relay() { return {secret(900), pk(900)}; }
};

// ---- R1 ---------------------------------------------------------------------------------
//
// Forced interleaving (H is a helper that only stands in for "B is slow for a
// moment between S4 and S5", e.g. a TTL edit of another channel of the batch):
//   H : channel_ttl:<perm> EXCLUSIVE (held)
//   B : ingest batch [kind-5 by member 3 deleting x; post by 3 in eph; post by 3 in perm]
//       S3 insert, S4 UPDATE events x (row lock on x), S5 waits for channel_ttl:<perm>
//   G : 9005 by owner 1 in eph deleting x: membership S, its event, S5 refresh of
//       eph = UPDATE channels eph (row lock), then UPDATE events x -> waits for B
//   H : commits.  B: S5 continues, UPDATE channels eph -> waits for G.  CYCLE.
// Claim 3 says no cycle is possible; expected: G stored, B stored, no deadlock.
TEST_F(ChannelRegressionTest, R1_DeleteEventCommandAndIngestBatchDoNotDeadlockOnRowLocks) {
  auto c = community();
  make_channel(c, "eph", 1, {3}, 3600);
  make_channel(c, "perm", 1, {3});
  const auto x = post(3, "eph", "to be deleted twice");
  ASSERT_EQ(db::write_batch(conn(), batch(c, {x})).at(0).outcome, write_outcome::stored);

  auto conn_h = connect();
  auto conn_b = connect();
  auto conn_g = connect();
  {
    pqxx::nontransaction t(*conn_b);
    t.exec("SET deadlock_timeout = '20s'");  // G runs the detector first: G is the victim
  }
  {
    pqxx::nontransaction t(*conn_g);
    t.exec("SET deadlock_timeout = '1s'");
  }
  const int pid_b = conn_b->backendpid();
  const int pid_g = conn_g->backendpid();

  const auto del = make_event(3, 5, fresh_time(), {{"e", x.id}});
  const auto in_eph = post(3, "eph", "batch post eph");
  const auto in_perm = post(3, "perm", "batch post perm");
  const auto mod = command(1, nip29::kind_delete_event, {{"h", "eph"}, {"e", x.id}});

  std::vector<write_result> b_res;
  std::string b_err, g_err, b_notices;
  db::command_outcome g_out;
  std::atomic<bool> b_done{false}, g_done{false};
  std::string b_wait, g_wait, b_wait2;

  pqxx::work hold(*conn_h);
  hold.exec_params("SELECT pg_advisory_xact_lock(hashtextextended($1, 0))",
                   db::channel_ttl_lock_key(c, "perm"));
  notice_collector collect(*conn_b);
  std::thread tb([&] {
    try {
      b_res = db::write_batch(*conn_b, batch(c, {del, in_eph, in_perm}));
    } catch (const std::exception& e) {
      b_err = describe(e);
    }
    b_done = true;
  });
  b_wait = wait_for_locktype(conn(), pid_b, b_done);  // B: after S4, waiting in S5
  std::thread tg([&] {
    try {
      g_out = db::apply_group_command(*conn_g, c, ptr(mod));
    } catch (const std::exception& e) {
      g_err = describe(e);
    }
    g_done = true;
  });
  g_wait = wait_for_locktype(conn(), pid_g, g_done);  // G: waits for B's row lock on x
  hold.commit();
  b_wait2 = wait_for_locktype(conn(), pid_b, b_done, 3s);
  tb.join();
  tg.join();
  b_notices = collect.text();

  EXPECT_EQ(b_wait, "advisory") << "B did not stop in S5 as forced";
  EXPECT_EQ(g_wait, "transactionid") << "G did not wait for B's row lock on x";
  // B's second wait: the channel row eph, held by G (a tuple/transactionid wait).
  RecordProperty("b_second_wait", b_wait2);
  // The claim: no deadlock. Observed: the detector kills G (40P01), or, if B ran
  // the detector, B's refresh is silently lost (WARNING with 40P01).
  EXPECT_EQ(g_err, "") << "the 9005 command was killed by a deadlock with an ingest batch";
  EXPECT_EQ(g_out.result.outcome, write_outcome::stored) << g_out.result.reason;
  EXPECT_EQ(b_err, "");
  EXPECT_EQ(b_notices.find("40P01"), std::string::npos) << b_notices;
}

// ---- R2 ---------------------------------------------------------------------------------
//
// (a) a concurrent membership writer that bypasses the relay:
//   W : BEGIN; INSERT canonical 39002 (fence passes, membership S held)
//   M : UPDATE channel_members ... -> must WAIT: the membership trigger takes
//       the lock EXCLUSIVE whoever writes (before the fix nothing waited and
//       the live 39002 listed a removed member)
//   W : COMMIT; then M commits, after the roster: the roster was canonical
//       at its commit.
TEST_F(ChannelRegressionTest, R2a_AMemberWriterBypassingTheRelayWaitsForTheRosterInFlight) {
  auto c = community();
  make_channel(c, "f1", 1, {3, 4});
  const auto signer = relay();
  const int64_t now = std::time(nullptr);
  ASSERT_FALSE(db::publish_roster(conn(), c, "f1", signer, now).events.empty());
  ASSERT_EQ(live_roster_mismatch(c, "f1", signer.pubkey), std::nullopt);

  auto conn_w = connect();
  auto conn_m = connect();
  const int m_pid = conn_m->backendpid();
  std::atomic<bool> m_done{false};
  std::thread m_thread;
  {
    pqxx::work w(*conn_w);
    nip29::roster members;
    members[pk(1)] = nip29::role::owner;
    members[pk(3)] = nip29::role::member;
    members[pk(4)] = nip29::role::member;
    proto::event ev;
    ev.kind = nip29::kind_group_members;
    ev.created_at = now + 10;
    ev.tags = nip29::members_tags("f1", members);
    proto::sign(ev, signer.secret);
    auto r = db::write_events(w, {ingest_item{c, ptr(ev)}});
    ASSERT_EQ(r.at(0).outcome, write_outcome::stored) << r.at(0).reason;
    m_thread = std::thread([&] {
      pqxx::work m(*conn_m);
      m.exec_params(
        "UPDATE channel_members SET removed_at = now(), removed_by = pubkey "
        " WHERE community_id = $1 AND channel_id = $2 AND pubkey = decode($3, 'hex')",
        c, std::string("f1"), pk(4));
      m.commit();
      m_done = true;
    });
    auto observer = connect();
    EXPECT_TRUE(eventually([&] {
      pqxx::nontransaction q(*observer);
      return !q.exec_params("SELECT 1 FROM pg_locks WHERE pid = $1 AND locktype = 'advisory' "
                            "AND NOT granted",
                            m_pid)
                .empty();
    })) << "the member writer did not wait for the membership lock";
    EXPECT_FALSE(m_done.load());
    try {
      w.commit();
    } catch (...) {
      m_thread.join();  // never leave the writer thread running on a failure
      throw;
    }
  }
  m_thread.join();
  EXPECT_TRUE(m_done.load());
  // The roster was canonical when it committed; the later change makes it
  // stale, which is what the relay's republication (or start-up) repairs.
  EXPECT_NE(live_roster_mismatch(c, "f1", signer.pubkey), std::nullopt);
}

// (b) the 39002's own transaction changes channel_members after its insert:
// the fence runs again at COMMIT (a deferred constraint trigger) and refuses.
TEST_F(ChannelRegressionTest, R2b_ARosterWhoseOwnTransactionChangesTheMembersAfterwardsFailsAtCommit) {
  auto c = community();
  make_channel(c, "f2", 1, {3});
  const auto signer = relay();
  const int64_t now = std::time(nullptr);
  ASSERT_FALSE(db::publish_roster(conn(), c, "f2", signer, now).events.empty());
  std::string err;
  try {
    pqxx::work w(conn());
    nip29::roster members;
    members[pk(1)] = nip29::role::owner;
    members[pk(3)] = nip29::role::member;
    proto::event ev;
    ev.kind = nip29::kind_group_members;
    ev.created_at = now + 10;
    ev.tags = nip29::members_tags("f2", members);
    proto::sign(ev, signer.secret);
    ASSERT_EQ(db::write_events(w, {ingest_item{c, ptr(ev)}}).at(0).outcome,
              write_outcome::stored);
    w.exec_params(
      "INSERT INTO channel_members (community_id, channel_id, pubkey, role, added_by) "
      "VALUES ($1, $2, decode($3, 'hex'), 'admin', decode($3, 'hex'))",
      c, std::string("f2"), pk(5));
    w.commit();
  } catch (const pqxx::sql_error& e) {
    err = e.sqlstate();
  }
  EXPECT_EQ(err, "23514");
  EXPECT_EQ(live_roster_mismatch(c, "f2", signer.pubkey), std::nullopt);
}

// ---- R3 ---------------------------------------------------------------------------------
// A writer that bypasses the relay stores, under the coordinate of channel
// "small" (whose roster is {owner 1}), the JSON of a 39002 whose `d` tag says
// "big" (whose roster is {1, 3}): the fence checks the columns, clients read
// the JSON. (Requires a writer with SQL access, like every fence bypass.)
TEST_F(ChannelRegressionTest, R3_TheFenceChecksTheDTagInsideTheStoredJson) {
  auto c = community();
  make_channel(c, "small", 1, {});
  make_channel(c, "big", 1, {3});
  const auto signer = relay();
  nip29::roster wrong;  // not big's roster (3 is missing)
  wrong[pk(1)] = nip29::role::owner;
  proto::event ev;
  ev.kind = nip29::kind_group_members;
  ev.created_at = std::time(nullptr);
  ev.tags = nip29::members_tags("big", wrong);  // d = big, but only the owner
  proto::sign(ev, signer.secret);
  std::string err;
  try {
    pqxx::work w(conn());
    w.exec_params(
      "INSERT INTO events (community_id, id, pubkey, created_at, kind, d_tag, raw) "
      "VALUES ($1, decode($2, 'hex'), decode($3, 'hex'), $4, 39002, 'small', $5)",
      c, ev.id, ev.pubkey, ev.created_at, ev.raw);
    w.commit();
  } catch (const std::exception& e) {
    err = describe(e);
  }
  EXPECT_NE(err.find("23514"), std::string::npos)
    << "the fence accepted a 39002 whose JSON names channel 'big' with a roster that is not "
       "big's: " << err;
}

}  // namespace
}  // namespace waggle::pgtest
