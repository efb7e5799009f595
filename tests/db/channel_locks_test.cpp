// Concurrency regressions of the channel lock protocol (docs/lock-protocol.md,
// migrations/0002_channels.sql, db/group_store.cpp):
//  1. a roster capture holds the membership lock SHARED until its publication
//     commits, so a membership change waits and the 39002 lists exactly the
//     captured roster;
//  2. commits to one permanent channel run concurrently (no tuple lock, the
//     channel row is never written);
//  3. a TTL change (channel_ttl EXCLUSIVE) orders every event's refresh
//     (channel_ttl SHARED): an event that waited computes its deadline from
//     the new TTL;
//  4. a failed refresh is a WARNING and never rejects the event.
//
// Each waiting party is observed in pg_locks from a third connection (never
// by elapsed time); bounded waits only detect failures (a regression fails
// instead of hanging).

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
#include "tests/db/channel_fixture.hpp"

namespace waggle::proto::nip29 {
// Roles by name in failure messages (rosters are maps pubkey -> role).
inline void PrintTo(role r, std::ostream* os) { *os << name_of(r); }
}  // namespace waggle::proto::nip29

namespace waggle::pgtest {
namespace {

namespace nip29 = proto::nip29;
using namespace std::chrono_literals;

// Bounded waits: failure detectors only, never what a test asserts on.
constexpr auto detector_timeout = 30s;

db::command_outcome apply(pqxx::connection& c, int64_t community_id, const proto::event& ev) {
  return db::apply_group_command(c, community_id, ptr(ev));
}

int backend_pid(pqxx::connection& c) {
  pqxx::nontransaction tx(c);
  return tx.exec("SELECT pg_backend_pid()")[0][0].as<int>();
}

// Mode of the advisory lock on hashtextextended(key, 0) that `pid` holds or
// awaits, with its granted flag, e.g. "ExclusiveLock waiting"; "" when none.
// A bigint advisory key is classid = high 32 bits, objid = low 32 bits.
std::string advisory_lock_on(pqxx::connection& observer, int pid, const std::string& key) {
  pqxx::nontransaction tx(observer);
  auto r = tx.exec_params(
    "SELECT l.mode || CASE WHEN l.granted THEN ' granted' ELSE ' waiting' END "
    "  FROM pg_locks l, (SELECT hashtextextended($2, 0) AS h) k "
    " WHERE l.pid = $1 AND l.locktype = 'advisory' AND l.objsubid = 1 "
    "   AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database()) "
    "   AND l.classid::bigint = ((k.h >> 32) & 4294967295) "
    "   AND l.objid::bigint = (k.h & 4294967295)",
    pid, key);
  return r.empty() ? std::string() : r[0][0].as<std::string>();
}

std::string describe(const std::exception& e) {
  if (auto* s = dynamic_cast<const pqxx::sql_error*>(&e))
    return s->sqlstate() + ": " + e.what();
  return e.what();
}

class ChannelLocksTest : public PgTest {
 protected:
  // Creates `ch` with signer `owner` as its owner (9007), then adds `members`
  // as plain members (9000), through the real group-command path.
  void make_channel(int64_t c, const std::string& ch, int owner, const std::vector<int>& members,
                    std::optional<int> ttl = std::nullopt) {
    std::vector<proto::tag> tags = {{"h", ch}, {"name", ch}};
    if (ttl)
      tags.push_back({"ttl", std::to_string(*ttl)});
    auto created = apply(conn(), c, command(owner, nip29::kind_create_group, tags));
    ASSERT_EQ(created.result.outcome, write_outcome::stored) << created.result.reason;
    if (members.empty())
      return;
    std::vector<proto::tag> put = {{"h", ch}};
    for (int m : members)
      put.push_back({"p", pk(m), "member"});
    auto added = apply(conn(), c, command(owner, nip29::kind_put_user, put));
    ASSERT_EQ(added.result.outcome, write_outcome::stored) << added.result.reason;
  }

  // Active members as committed (read from the fixture's own connection).
  nip29::roster committed_roster(int64_t c, const std::string& ch) {
    pqxx::nontransaction tx(conn());
    nip29::roster out;
    for (const auto& row : tx.exec_params(
           "SELECT encode(pubkey, 'hex'), role FROM channel_members "
           " WHERE community_id = $1 AND channel_id = $2 AND removed_at IS NULL",
           c, ch))
      out.emplace(row[0].as<std::string>(), *nip29::parse_role(row[1].as<std::string>()));
    return out;
  }

  std::string channel_xmin(int64_t c, const std::string& ch) {
    pqxx::nontransaction tx(conn());
    return tx.exec_params("SELECT xmin::text FROM channels WHERE community_id = $1 AND id = $2", c, ch)[0][0]
      .as<std::string>();
  }

  struct ttl_state {
    std::optional<int32_t> ttl_seconds;
    std::optional<double> deadline;   // epoch seconds
    std::optional<double> remaining;  // deadline - clock_timestamp(), seconds
  };
  ttl_state channel_ttl(int64_t c, const std::string& ch) {
    pqxx::nontransaction tx(conn());
    auto r = tx.exec_params(
      "SELECT ttl_seconds, extract(epoch FROM ttl_deadline)::float8, "
      "       extract(epoch FROM ttl_deadline - clock_timestamp())::float8 "
      "  FROM channels WHERE community_id = $1 AND id = $2",
      c, ch)[0];
    ttl_state s;
    if (!r[0].is_null())
      s.ttl_seconds = r[0].as<int32_t>();
    if (!r[1].is_null()) {
      s.deadline = r[1].as<double>();
      s.remaining = r[2].as<double>();
    }
    return s;
  }

  const proto::event* find_kind(const std::vector<event_ptr>& evs, int32_t kind) {
    for (const auto& e : evs)
      if (e->kind == kind)
        return e.get();
    return nullptr;
  }

  db::relay_signer relay() { return {secret(900), pk(900)}; }

  // ---- 1. roster capture vs membership change ---------------------------------------
  //
  // P captures the roster and stops there, holding its locks, uncommitted; M's
  // membership change (`change`, signed by the owner) must wait for P's
  // commit, so P publishes exactly what it captured (`before`) and M's change
  // (`after`) is in the next publication.
  void roster_capture_blocks_membership_change(int64_t c, const std::string& ch,
                                               const proto::event& change,
                                               const nip29::roster& before,
                                               const nip29::roster& after) {
    ASSERT_EQ(committed_roster(c, ch), before);
    auto conn_p = connect();
    auto conn_m = connect();
    const int pid_p = backend_pid(*conn_p);
    const int pid_m = backend_pid(*conn_m);
    const int64_t now = std::time(nullptr);
    const auto signer = relay();

    // Everything the workers write outlives them (declared before the threads).
    gate captured, release;
    std::optional<nip29::roster> seen;
    db::roster_publication pub;
    std::string p_error;
    std::atomic<bool> p_done{false};
    db::command_outcome m_out;
    std::string m_error;
    std::atomic<bool> m_done{false};

    std::jthread p, m;
    open_on_exit release_on_exit{release};  // destroyed before p and m are joined

    p = std::jthread([&] {
      try {
        pub = db::publish_roster(*conn_p, c, ch, signer, now, [&](const nip29::roster& r) {
          seen = r;
          captured.open();
          release.wait();  // P holds its locks, uncommitted, until the test says so
        });
      } catch (const std::exception& e) {
        p_error = describe(e);
      }
      p_done = true;
      captured.open();  // never leave the test waiting when P failed before its capture
    });

    // No ASSERT until the workers are joined: they may be blocked.
    const bool did_capture = captured.wait_for(detector_timeout) && seen.has_value();
    EXPECT_TRUE(did_capture) << "P did not reach its capture: " << p_error;
    if (did_capture) {
      EXPECT_FALSE(p_done) << "P must still be inside its transaction";
      // P holds the membership key SHARED through its capture.
      EXPECT_EQ(advisory_lock_on(conn(), pid_p, db::membership_lock_key(c, ch)), "ShareLock granted");
      m = std::jthread([&] {
        try {
          m_out = db::apply_group_command(*conn_m, c, ptr(change));
        } catch (const std::exception& e) {
          m_error = describe(e);
        }
        m_done = true;
      });
      const auto blocked = wait_for_locktype(conn(), pid_m, m_done);
      EXPECT_EQ(blocked, "advisory") << "M's membership change did not wait for P's capture "
                                        "(\"finished\": it ran while P held its snapshot)";
      if (blocked == "advisory") {
        EXPECT_EQ(advisory_lock_on(conn(), pid_m, db::membership_lock_key(c, ch)),
                  "ExclusiveLock waiting");
      }
      EXPECT_FALSE(m_done);
      // While M waits, its change is not committed.
      EXPECT_EQ(committed_roster(c, ch), before);
    }

    release.open();
    p.join();
    if (m.joinable())
      m.join();

    EXPECT_EQ(p_error, "") << "P's publication failed";
    EXPECT_EQ(m_error, "") << "M's change failed";
    ASSERT_TRUE(seen.has_value());
    EXPECT_EQ(*seen, before) << "P captured a roster other than the one committed before M";
    EXPECT_EQ(pub.members, before);
    // P's 39002 lists exactly the roster P captured, without M's change...
    const auto* published = find_kind(pub.events, nip29::kind_group_members);
    ASSERT_NE(published, nullptr) << "P's 39002 was not stored";
    EXPECT_EQ(published->tags, nip29::members_tags(ch, before));
    EXPECT_EQ(published->pubkey, signer.pubkey);
    // ...and M's change committed after it.
    EXPECT_EQ(m_out.result.outcome, write_outcome::stored) << m_out.result.reason;
    EXPECT_TRUE(m_out.change.roster_changed);
    EXPECT_EQ(committed_roster(c, ch), after);

    // The next publication includes M's change.
    auto next = db::publish_roster(conn(), c, ch, signer, now);
    EXPECT_EQ(next.members, after);
    const auto* republished = find_kind(next.events, nip29::kind_group_members);
    ASSERT_NE(republished, nullptr) << "the next 39002 was not stored";
    EXPECT_EQ(republished->tags, nip29::members_tags(ch, after));
    EXPECT_GT(republished->created_at, published->created_at);
    EXPECT_FALSE(is_live(c, published->id));
    EXPECT_TRUE(is_live(c, republished->id));
  }
};

TEST_F(ChannelLocksTest, RosterCaptureMakesAMemberAdditionWait) {
  auto c = community();
  const std::string ch = "roster-add";
  make_channel(c, ch, 1, {2, 3});
  const nip29::roster before = {
    {pk(1), nip29::role::owner}, {pk(2), nip29::role::member}, {pk(3), nip29::role::member}};
  auto after = before;
  after.emplace(pk(4), nip29::role::member);
  roster_capture_blocks_membership_change(
    c, ch, command(1, nip29::kind_put_user, {{"h", ch}, {"p", pk(4), "member"}}), before, after);
}

TEST_F(ChannelLocksTest, RosterCaptureMakesAMemberRemovalWait) {
  auto c = community();
  const std::string ch = "roster-remove";
  make_channel(c, ch, 1, {2, 3});
  const nip29::roster before = {
    {pk(1), nip29::role::owner}, {pk(2), nip29::role::member}, {pk(3), nip29::role::member}};
  auto after = before;
  after.erase(pk(3));
  roster_capture_blocks_membership_change(
    c, ch, command(1, nip29::kind_remove_user, {{"h", ch}, {"p", pk(3)}}), before, after);
}

// ---- 2. concurrent commits to one permanent channel ---------------------------------

// Workers arrive and wait until the test releases them all at once.
class release_barrier {
 public:
  void arrive_and_wait() {
    std::unique_lock lk(m_);
    ++arrived_;
    cv_.notify_all();
    cv_.wait(lk, [&] { return released_; });
  }
  // Waits up to `d` for `n` arrivals; true when they are all there.
  bool wait_arrivals(int n, std::chrono::milliseconds d) {
    std::unique_lock lk(m_);
    return cv_.wait_for(lk, d, [&] { return arrived_ >= n; });
  }
  int arrived() {
    std::lock_guard lk(m_);
    return arrived_;
  }
  void release() {
    {
      std::lock_guard lk(m_);
      released_ = true;
    }
    cv_.notify_all();
  }

 private:
  std::mutex m_;
  std::condition_variable cv_;
  int arrived_ = 0;
  bool released_ = false;
};

struct release_on_exit {
  release_barrier& b;
  ~release_on_exit() { b.release(); }
};

TEST_F(ChannelLocksTest, EightCommitsToOnePermanentChannelRunConcurrentlyWithoutTouchingItsRow) {
  constexpr int n = 8;
  auto c = community();
  const std::string ch = "busy";
  std::vector<int> authors;
  for (int i = 0; i < n; ++i)
    authors.push_back(11 + i);
  make_channel(c, ch, 1, authors);
  ASSERT_FALSE(channel_ttl(c, ch).ttl_seconds.has_value()) << "the channel must be permanent";
  const auto xmin_before = channel_xmin(c, ch);

  std::vector<std::unique_ptr<pqxx::connection>> conns;
  std::vector<int> pids;
  std::vector<proto::event> posts;
  for (int i = 0; i < n; ++i) {
    conns.push_back(connect());
    pids.push_back(backend_pid(*conns.back()));
    posts.push_back(post(authors[i], ch, "post " + std::to_string(i)));
  }
  std::string pid_list = "{";
  for (int i = 0; i < n; ++i)
    pid_list += (i ? "," : "") + std::to_string(pids[i]);
  pid_list += "}";
  const auto ttl_key = db::channel_ttl_lock_key(c, ch);

  release_barrier barrier;
  std::vector<std::string> outcome(n, "not run");
  std::vector<std::jthread> workers;
  release_on_exit release_guard{barrier};  // destroyed before the workers are joined
  for (int i = 0; i < n; ++i)
    workers.emplace_back([&, i] {
      try {
        db::write_options opts;
        opts.before_commit = [&] { barrier.arrive_and_wait(); };
        auto r = db::write_batch(*conns[i], batch(c, {posts[i]}), opts);
        outcome[i] = std::string(outcome_name(r.at(0).outcome)) + r.at(0).reason;
      } catch (const std::exception& e) {
        outcome[i] = describe(e);
      }
    });

  // Wait until all eight are at the barrier; stop early if one of them waits
  // for a lock (then they cannot all get there). A relation extension lock
  // is PostgreSQL's own, held for the microseconds a page is added while
  // eight inserts run at once, never across the barrier: seen waiting once
  // in a clean run, it said nothing about the channel's locks.
  auto any_waiting = [&] {
    pqxx::nontransaction tx(conn());
    auto r = tx.exec_params(
      "SELECT pid, locktype, mode FROM pg_locks WHERE NOT granted AND locktype <> 'extend' "
      "   AND pid = ANY($1::int[]) LIMIT 1",
      pid_list);
    return r.empty() ? std::string()
                     : "backend " + r[0][0].as<std::string>() + " waits for a " +
                         r[0][1].as<std::string>() + " lock (" + r[0][2].as<std::string>() + ")";
  };
  bool all_arrived = false;
  std::string waiting;
  for (auto until = std::chrono::steady_clock::now() + detector_timeout;
       std::chrono::steady_clock::now() < until;) {
    if ((all_arrived = barrier.wait_arrivals(n, 20ms)))
      break;
    if (!(waiting = any_waiting()).empty())
      break;
  }
  EXPECT_TRUE(all_arrived) << barrier.arrived() << " of " << n
                           << " commits reached the barrier; " << waiting;
  EXPECT_EQ(any_waiting(), "");
  {
    pqxx::nontransaction tx(conn());
    // No tuple lock on channels (of this database) anywhere.
    EXPECT_EQ(tx.exec("SELECT count(*) FROM pg_locks WHERE locktype = 'tuple' "
                      "   AND relation = 'channels'::regclass "
                      "   AND database = (SELECT oid FROM pg_database WHERE datname = current_database())")
                [0][0].as<int>(),
              0);
  }
  // The barrier is after the TTL refresh: every one holds the channel_ttl key SHARED.
  if (all_arrived) {
    for (int i = 0; i < n; ++i)
      EXPECT_EQ(advisory_lock_on(conn(), pids[i], ttl_key), "ShareLock granted") << "worker " << i;
  }
  EXPECT_EQ(channel_xmin(c, ch), xmin_before) << "the channel row was written while they were open";

  barrier.release();
  for (auto& w : workers)
    w.join();
  for (int i = 0; i < n; ++i) {
    EXPECT_EQ(outcome[i], "stored") << "worker " << i;
    EXPECT_TRUE(is_live(c, posts[i].id)) << "worker " << i;
  }
  EXPECT_EQ(channel_xmin(c, ch), xmin_before) << "a commit wrote the permanent channel's row";
}

// ---- 3. TTL change vs event insert ----------------------------------------------------

TEST_F(ChannelLocksTest, EventWaitsForATtlChangeAndRefreshesWithTheNewTtl) {
  auto c = community();
  const std::string ch = "ephemeral";
  make_channel(c, ch, 1, {2}, 60);
  ASSERT_EQ(channel_ttl(c, ch).ttl_seconds, 60);

  auto conn_t = connect();
  auto conn_e = connect();
  const int pid_e = backend_pid(*conn_e);
  const auto ev = post(2, ch, "during the ttl change");

  std::string e_outcome = "not run";
  std::atomic<bool> e_done{false};
  std::jthread e;  // declared before tx_t: joined after tx_t let go of the key
  pqxx::work tx_t(*conn_t);
  tx_t.exec_params("SELECT pg_advisory_xact_lock(hashtextextended($1, 0))",
                   db::channel_ttl_lock_key(c, ch));
  const double t_deadline =
    tx_t.exec_params("UPDATE channels SET ttl_seconds = 3600, "
                     "       ttl_deadline = clock_timestamp() + interval '3600 s' "
                     " WHERE community_id = $1 AND id = $2 "
                     "RETURNING extract(epoch FROM ttl_deadline)::float8",
                     c, ch)[0][0].as<double>();

  e = std::jthread([&] {
    try {
      auto r = db::write_batch(*conn_e, batch(c, {ev}));
      e_outcome = std::string(outcome_name(r.at(0).outcome)) + r.at(0).reason;
    } catch (const std::exception& ex) {
      e_outcome = describe(ex);
    }
    e_done = true;
  });

  // No ASSERT until E is joined: it may be blocked on T's key.
  const auto blocked = wait_for_locktype(conn(), pid_e, e_done);
  EXPECT_EQ(blocked, "advisory") << "E's refresh did not wait for the TTL change";
  if (blocked == "advisory") {
    EXPECT_EQ(advisory_lock_on(conn(), pid_e, db::channel_ttl_lock_key(c, ch)), "ShareLock waiting");
  }
  EXPECT_FALSE(e_done);
  EXPECT_FALSE(exists(c, ev.id));

  tx_t.commit();
  e.join();

  EXPECT_EQ(e_outcome, "stored");
  EXPECT_TRUE(is_live(c, ev.id));
  auto s = channel_ttl(c, ch);
  EXPECT_EQ(s.ttl_seconds, 3600);
  ASSERT_TRUE(s.remaining.has_value());
  // Computed from the new TTL (not ~60 s), after T's own deadline.
  EXPECT_GT(*s.remaining, 3590.0);
  EXPECT_LE(*s.remaining, 3600.0);
  EXPECT_GT(*s.deadline, t_deadline) << "E's refresh did not run after the TTL change";
}

TEST_F(ChannelLocksTest, TtlCommandChangesTheTtlAndTheDeadline) {
  auto c = community();
  const std::string ch = "ttl-cmd";
  make_channel(c, ch, 1, {2}, 60);
  auto s = channel_ttl(c, ch);
  ASSERT_EQ(s.ttl_seconds, 60);
  ASSERT_TRUE(s.remaining.has_value());
  EXPECT_LE(*s.remaining, 60.0);

  auto r = apply(conn(), c, command(1, nip29::kind_edit_metadata, {{"h", ch}, {"ttl", "3600"}}));
  ASSERT_EQ(r.result.outcome, write_outcome::stored) << r.result.reason;
  EXPECT_TRUE(r.change.metadata_changed);
  s = channel_ttl(c, ch);
  EXPECT_EQ(s.ttl_seconds, 3600);
  ASSERT_TRUE(s.remaining.has_value());
  EXPECT_GT(*s.remaining, 3590.0);
  EXPECT_LE(*s.remaining, 3600.0);

  // A post refreshes with the new TTL.
  ASSERT_EQ(db::write_batch(conn(), batch(c, {post(2, ch, "after the change")})).at(0).outcome,
            write_outcome::stored);
  s = channel_ttl(c, ch);
  ASSERT_TRUE(s.remaining.has_value());
  EXPECT_GT(*s.remaining, 3590.0);

  // "0": permanent again, no deadline.
  r = apply(conn(), c, command(1, nip29::kind_edit_metadata, {{"h", ch}, {"ttl", "0"}}));
  ASSERT_EQ(r.result.outcome, write_outcome::stored) << r.result.reason;
  s = channel_ttl(c, ch);
  EXPECT_FALSE(s.ttl_seconds.has_value());
  EXPECT_FALSE(s.deadline.has_value());
}

// ---- 4. a refresh failure never rejects the event ------------------------------------

// Collects the notices (warnings) a connection receives.
TEST_F(ChannelLocksTest, FailedRefreshIsAWarningAndTheEventIsStored) {
  auto c = community();
  const std::string ch = "flaky";
  make_channel(c, ch, 1, {2}, 60);
  const auto before = channel_ttl(c, ch);
  ASSERT_TRUE(before.deadline.has_value());

  // T holds the channel_ttl key EXCLUSIVE; E gives up waiting for it after
  // 1 ms, so the refresh raises 55P03 inside its EXCEPTION block.
  auto conn_t = connect();
  auto conn_e = connect();
  {
    pqxx::nontransaction tx(*conn_e);
    tx.exec("SET lock_timeout = '1ms'");
  }
  const auto ev = post(2, ch, "refresh fails");
  std::string notices;
  {
    notice_collector collect(*conn_e);
    pqxx::work tx_t(*conn_t);
    tx_t.exec_params("SELECT pg_advisory_xact_lock(hashtextextended($1, 0))",
                     db::channel_ttl_lock_key(c, ch));
    std::vector<write_result> r;
    auto failures_before = db::ttl_refresh_failures();
    EXPECT_NO_THROW(r = db::write_batch(*conn_e, batch(c, {ev})));
    ASSERT_EQ(r.size(), 1u);
    EXPECT_EQ(r[0].outcome, write_outcome::stored) << r[0].reason;
    // Counted, so the metric shows a refresh that keeps failing.
    EXPECT_EQ(db::ttl_refresh_failures(), failures_before + 1);
    tx_t.abort();
    notices = collect.text();
  }
  EXPECT_TRUE(is_live(c, ev.id));
  EXPECT_NE(notices.find("WARNING"), std::string::npos) << notices;
  EXPECT_NE(notices.find("channel TTL refresh failed"), std::string::npos) << notices;
  EXPECT_NE(notices.find("55P03"), std::string::npos) << notices;
  // The refresh was lost, and only the refresh.
  EXPECT_EQ(channel_ttl(c, ch).deadline, before.deadline);

  // With the key free, the next post refreshes the deadline.
  {
    pqxx::nontransaction tx(*conn_e);
    tx.exec("RESET lock_timeout");
  }
  ASSERT_EQ(db::write_batch(*conn_e, batch(c, {post(2, ch, "refresh works")})).at(0).outcome,
            write_outcome::stored);
  auto after = channel_ttl(c, ch);
  ASSERT_TRUE(after.deadline.has_value());
  EXPECT_GT(*after.deadline, *before.deadline);
  EXPECT_GT(*after.remaining, 50.0);
  EXPECT_LE(*after.remaining, 60.0);
}

}  // namespace
}  // namespace waggle::pgtest
