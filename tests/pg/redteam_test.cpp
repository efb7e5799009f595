// Red-team tests (independent review of docs/channels.md). Each test states a
// claim of the design and tries to break it with a forced interleaving. A
// FAILING test here is a demonstrated counterexample, not a flaky test.
//
//  R1 (claim 3, lock protocol): a 9005 command on an EPHEMERAL channel locks
//     the channel row (its own event's TTL refresh) BEFORE it locks the events
//     it deletes; an ingest batch locks events (S2 replace / S4 NIP-09 delete)
//     BEFORE the channel row (S5 refresh). Row locks, not advisory locks: a
//     deadlock cycle the advisory-lock analysis cannot see.
//  R2 (claim 1, fence): the fence compares at INSERT time. A membership writer
//     that does not take the membership lock (nothing in the database makes
//     it), or the 39002's own transaction, can change channel_members after
//     the check: a 39002 that differs from channel_members at its commit
//     becomes live.
//  R3 (claim 1, fence): the fence trusts the d_tag/community_id columns and
//     never looks at the `d` tag inside the stored JSON that clients read.
//  R4 (claims 2 + 5, durability of side effects): a command whose commit
//     outcome is unknown to the relay (in_doubt) and is then retried is
//     answered `duplicate` with an EMPTY change: the group actor then sends no
//     revocation and no roster_dirty (after_commit runs only for `stored`).

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <ctime>
#include <mutex>
#include <optional>
#include <thread>

#include <pqxx/errorhandler>

#include "db/group_store.hpp"
#include "messages/proto/nip29.hpp"
#include "tests/pg/pg_fixture.hpp"

namespace waggle::pgtest {
namespace {

namespace nip29 = proto::nip29;
using namespace std::chrono_literals;
using db::write_outcome;

std::string pk(int n) { return proto::pubkey_of(secret(n)); }

int64_t fresh_time() {
  static std::atomic<int64_t> n{0};
  return static_cast<int64_t>(std::time(nullptr)) - 200000 + n++;
}

proto::event command(int signer, int32_t kind, std::vector<proto::tag> tags) {
  return make_event(signer, kind, fresh_time(), std::move(tags));
}

proto::event post(int author, const std::string& channel, const std::string& text) {
  return make_event(author, 9, fresh_time(), {{"h", channel}}, text);
}

std::string describe(const std::exception& e) {
  if (auto* s = dynamic_cast<const pqxx::sql_error*>(&e))
    return s->sqlstate() + ": " + e.what();
  return e.what();
}

class notice_collector : public pqxx::errorhandler {
 public:
  explicit notice_collector(pqxx::connection_base& c) : pqxx::errorhandler(c) {}
  bool operator()(const char msg[]) noexcept override {
    try {
      std::lock_guard lk(m_);
      text_ += msg;
    } catch (...) {
    }
    return false;
  }
  std::string text() {
    std::lock_guard lk(m_);
    return text_;
  }

 private:
  std::mutex m_;
  std::string text_;
};

// The locktype backend `pid` waits for ("" when none).
std::string awaited_locktype(pqxx::connection& observer, int pid) {
  pqxx::nontransaction tx(observer);
  auto r = tx.exec_params("SELECT locktype FROM pg_locks WHERE pid = $1 AND NOT granted LIMIT 1", pid);
  return r.empty() ? std::string() : r[0][0].as<std::string>();
}

std::string wait_for_locktype(pqxx::connection& observer, int pid, const std::atomic<bool>& done,
                              std::chrono::milliseconds timeout = 20s) {
  auto until = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < until) {
    if (auto t = awaited_locktype(observer, pid); !t.empty())
      return t;
    if (done)
      return "finished";
    std::this_thread::sleep_for(5ms);
  }
  return "";
}

class RedTeamTest : public PgTest {
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
TEST_F(RedTeamTest, R1_DeleteEventCommandAndIngestBatchDeadlockOnRowLocks) {
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

  std::vector<db::write_result> b_res;
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
// (a) a concurrent membership writer without the membership lock:
//   W : BEGIN; INSERT canonical 39002 (fence passes, membership S held)
//   M : UPDATE channel_members SET removed_at = now() ... ; COMMIT   (nothing waits)
//   W : COMMIT  -> the live 39002 lists a removed member.
TEST_F(RedTeamTest, R2a_LiveRosterDiffersFromMembersAtCommitWhenAMemberWriterSkipsTheLock) {
  auto c = community();
  make_channel(c, "f1", 1, {3, 4});
  const auto signer = relay();
  const int64_t now = std::time(nullptr);
  ASSERT_FALSE(db::publish_roster(conn(), c, "f1", signer, now).events.empty());
  ASSERT_EQ(live_roster_mismatch(c, "f1", signer.pubkey), std::nullopt);

  auto conn_w = connect();
  auto conn_m = connect();
  {
    pqxx::work w(*conn_w);
    // The relay's own publication path, but stopped before COMMIT: publish a
    // canonical roster with write_events (the fence fires and passes).
    nip29::roster members;
    members[pk(1)] = nip29::role::owner;
    members[pk(3)] = nip29::role::member;
    members[pk(4)] = nip29::role::member;
    proto::event ev;
    ev.kind = nip29::kind_group_members;
    ev.created_at = now + 10;
    ev.tags = nip29::members_tags("f1", members);
    proto::sign(ev, signer.secret);
    auto r = db::write_events(w, {db::ingest_item{c, ptr(ev)}});
    ASSERT_EQ(r.at(0).outcome, write_outcome::stored) << r.at(0).reason;
    {
      pqxx::work m(*conn_m);
      m.exec_params(
        "UPDATE channel_members SET removed_at = now(), removed_by = pubkey "
        " WHERE community_id = $1 AND channel_id = $2 AND pubkey = decode($3, 'hex')",
        c, std::string("f1"), pk(4));
      m.commit();  // did not wait: no lock, no trigger on channel_members
    }
    w.commit();
  }
  EXPECT_EQ(live_roster_mismatch(c, "f1", signer.pubkey), std::nullopt)
    << "a 39002 that differs from channel_members at its commit is live";
}

// (b) the 39002's own transaction changes channel_members after its insert.
TEST_F(RedTeamTest, R2b_LiveRosterDiffersFromMembersWhenItsOwnTransactionChangesThemAfter) {
  auto c = community();
  make_channel(c, "f2", 1, {3});
  const auto signer = relay();
  const int64_t now = std::time(nullptr);
  ASSERT_FALSE(db::publish_roster(conn(), c, "f2", signer, now).events.empty());
  {
    pqxx::work w(conn());
    nip29::roster members;
    members[pk(1)] = nip29::role::owner;
    members[pk(3)] = nip29::role::member;
    proto::event ev;
    ev.kind = nip29::kind_group_members;
    ev.created_at = now + 10;
    ev.tags = nip29::members_tags("f2", members);
    proto::sign(ev, signer.secret);
    ASSERT_EQ(db::write_events(w, {db::ingest_item{c, ptr(ev)}}).at(0).outcome,
              write_outcome::stored);
    // Even taking the membership lock EXCLUSIVE (an upgrade, allowed: nobody
    // else holds it) does not help: the fence ran at INSERT, not at COMMIT.
    w.exec_params("SELECT pg_advisory_xact_lock(hashtextextended($1, 0))",
                  db::membership_lock_key(c, "f2"));
    w.exec_params(
      "INSERT INTO channel_members (community_id, channel_id, pubkey, role, added_by) "
      "VALUES ($1, $2, decode($3, 'hex'), 'admin', decode($3, 'hex'))",
      c, std::string("f2"), pk(5));
    w.commit();
  }
  EXPECT_EQ(live_roster_mismatch(c, "f2", signer.pubkey), std::nullopt)
    << "a 39002 that differs from channel_members at its commit is live";
}

// ---- R3 ---------------------------------------------------------------------------------
// A writer that bypasses the relay stores, under the coordinate of channel
// "small" (whose roster is {owner 1}), the JSON of a 39002 whose `d` tag says
// "big" (whose roster is {1, 3}): the fence checks the columns, clients read
// the JSON. (Requires a writer with SQL access, like every fence bypass.)
TEST_F(RedTeamTest, R3_FenceIgnoresTheDTagInsideTheStoredJson) {
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
  EXPECT_NE(err, "") << "the fence accepted a 39002 whose JSON names channel 'big' with a "
                        "roster that is not big's";
}

// ---- R4 ---------------------------------------------------------------------------------
// The store half of the in-doubt scenario (the actor half: group_actor.cpp
// after_commit runs only when the outcome is `stored`). A removal committed,
// but the relay did not learn it (pqxx::in_doubt_error -> `failed`); the
// client retries the same event -> `duplicate` (OK true) with no change, so no
// channel_revoked and no roster_dirty are ever sent for it.
TEST_F(RedTeamTest, R4_RetriedRemovalAfterAnUnknownCommitOutcomeReportsNoChange) {
  auto c = community();
  make_channel(c, "priv", 1, {3});
  auto removal = command(1, nip29::kind_remove_user, {{"h", "priv"}, {"p", pk(3)}});
  auto first = db::apply_group_command(conn(), c, ptr(removal));  // committed; reply "lost"
  ASSERT_EQ(first.result.outcome, write_outcome::stored);
  ASSERT_EQ(first.change.removed, std::vector<std::string>{pk(3)});
  auto retry = db::apply_group_command(conn(), c, ptr(removal));
  EXPECT_EQ(retry.result.outcome, write_outcome::duplicate);
  // What the group actor needs to revoke 3's subscriptions and republish:
  EXPECT_EQ(retry.change.removed, std::vector<std::string>{pk(3)})
    << "the retried removal carries no change: no revocation, no roster publication";
}

}  // namespace
}  // namespace waggle::pgtest
