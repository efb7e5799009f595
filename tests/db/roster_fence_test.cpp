// The roster fence (migrations/0003_roster_fence.sql, docs/lock-protocol.md): the
// database refuses a stale or malformed kind-39002 member list whoever
// inserts it, comparing under the channel's membership lock; the start-up
// check (db/roster_fence.hpp) refuses a missing, disabled or inert fence;
// stale_rosters lists the channels whose stored roster needs a repair.

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <thread>

#include "db/roster_fence.hpp"
#include "tests/support/pg_fixture.hpp"
#include "tests/support/test_paths.hpp"

namespace waggle::pgtest {
namespace {

// Pubkeys (hex) of members and relays: distinct numbers, 64 hex digits.
std::string pk(int n) { return secret(n); }

// A fresh event id for every inserted snapshot.
std::string fresh_id() {
  static std::atomic<int> n{1};
  char buf[65];
  std::snprintf(buf, sizeof buf, "%08x%056x", static_cast<unsigned>(::getpid()), n++);
  return buf;
}

struct p_entry {
  std::string pubkey;
  std::string role;
};

// tags JSON of a 39002: ["d", channel] then ["p", pk, "", role] each.
std::string roster_tags(const std::string& channel, const std::vector<p_entry>& members) {
  std::string s = "[[\"d\",\"" + channel + "\"]";
  for (const auto& m : members)
    s += ",[\"p\",\"" + m.pubkey + "\",\"\",\"" + m.role + "\"]";
  return s + "]";
}

std::string raw_of(const std::string& id, const std::string& pubkey, const std::string& tags_json) {
  return "{\"id\":\"" + id + "\",\"pubkey\":\"" + pubkey +
         "\",\"created_at\":1000,\"kind\":39002,\"tags\":" + tags_json +
         ",\"content\":\"\",\"sig\":\"" + std::string(128, '0') + "\"}";
}

// A plain SQL insert of a 39002, bypassing the relay (a "stale writer").
void insert_roster(pqxx::transaction_base& tx, int64_t community_id, const std::string& channel,
                   const std::string& relay, const std::string& tags_json,
                   const std::string& id = fresh_id()) {
  tx.exec_params(
    "INSERT INTO events (community_id, id, pubkey, created_at, kind, d_tag, raw, channel) "
    "VALUES ($1, decode($2, 'hex'), decode($3, 'hex'), 1000, 39002, $4, $5, NULL)",
    community_id, id, relay, channel, raw_of(id, relay, tags_json));
}

void add_channel(pqxx::connection& c, int64_t community_id, const std::string& channel,
                 const std::string& owner) {
  pqxx::work tx(c);
  tx.exec_params(
    "INSERT INTO channels (community_id, id, name, created_by) VALUES ($1, $2, $2, decode($3, 'hex'))",
    community_id, channel, owner);
  tx.commit();
}

void put_member(pqxx::transaction_base& tx, int64_t community_id, const std::string& channel,
                const std::string& pubkey, const std::string& role) {
  tx.exec_params(
    "INSERT INTO channel_members (community_id, channel_id, pubkey, role, added_by) "
    "VALUES ($1, $2, decode($3, 'hex'), $4, decode($3, 'hex')) "
    "ON CONFLICT (community_id, channel_id, pubkey) "
    "DO UPDATE SET role = excluded.role, removed_at = NULL, removed_by = NULL",
    community_id, channel, pubkey, role);
}

void put_member(pqxx::connection& c, int64_t community_id, const std::string& channel,
                const std::string& pubkey, const std::string& role) {
  pqxx::work tx(c);
  put_member(tx, community_id, channel, pubkey, role);
  tx.commit();
}

void remove_member(pqxx::connection& c, int64_t community_id, const std::string& channel,
                   const std::string& pubkey) {
  pqxx::work tx(c);
  tx.exec_params(
    "UPDATE channel_members SET removed_at = now(), removed_by = pubkey "
    "WHERE community_id = $1 AND channel_id = $2 AND pubkey = decode($3, 'hex')",
    community_id, channel, pubkey);
  tx.commit();
}

// Inserts and commits a 39002 in its own transaction: "" when it was stored,
// else "<sqlstate>: <message>".
std::string try_insert_roster(pqxx::connection& c, int64_t community_id, const std::string& channel,
                              const std::string& relay, const std::string& tags_json,
                              const std::string& id = fresh_id()) {
  try {
    pqxx::work tx(c);
    insert_roster(tx, community_id, channel, relay, tags_json, id);
    tx.commit();
    return "";
  } catch (const pqxx::sql_error& e) {
    return e.sqlstate() + ": " + e.what();
  }
}

int64_t live_rosters(pqxx::connection& c, int64_t community_id, const std::string& channel,
                     const std::string& relay) {
  pqxx::nontransaction tx(c);
  return tx.exec_params(
             "SELECT count(*) FROM events WHERE community_id = $1 AND kind = 39002 "
             "AND pubkey = decode($2, 'hex') AND d_tag = $3 AND deleted_at IS NULL",
             community_id, relay, channel)[0][0]
    .as<int64_t>();
}

std::string read_text(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

bool contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

// ---- a. the fence against a writer that bypasses the relay ---------------------------

class RosterFenceTest : public PgTest {};

TEST_F(RosterFenceTest, StaleWriterBypassingTheRelayIsRefusedAndRolledBack) {
  auto c = community();
  const std::string ch = "room", relay = pk(900);
  add_channel(conn(), c, ch, pk(1));
  put_member(conn(), c, ch, pk(1), "owner");
  put_member(conn(), c, ch, pk(2), "member");
  // What a stale writer captured before pk(3) joined.
  const auto old_roster = roster_tags(ch, {{pk(1), "owner"}, {pk(2), "member"}});
  put_member(conn(), c, ch, pk(3), "member");

  const auto canonical = fresh_id();
  ASSERT_EQ(try_insert_roster(conn(), c, ch, relay,
                              roster_tags(ch, {{pk(1), "owner"}, {pk(2), "member"}, {pk(3), "member"}}),
                              canonical),
            "");
  ASSERT_EQ(live_rosters(conn(), c, ch, relay), 1);

  // The stale writer replaces the head the way a writer does (the old head
  // deleted, then the new one inserted), in a transaction of its own.
  std::string state;
  {
    pqxx::work tx(conn());
    try {
      auto gone = tx.exec_params(
        "UPDATE events SET deleted_at = now() WHERE community_id = $1 AND kind = 39002 "
        "AND pubkey = decode($2, 'hex') AND coalesce(d_tag, '') = $3 AND deleted_at IS NULL",
        c, relay, ch);
      EXPECT_EQ(gone.affected_rows(), 1u);
      insert_roster(tx, c, ch, relay, old_roster);
      tx.commit();
      state = "committed";
    } catch (const pqxx::sql_error& e) {
      state = e.sqlstate();
      EXPECT_TRUE(contains(e.what(), "members differ from channel_members")) << e.what();
    }
  }
  EXPECT_EQ(state, "23514");
  // Rolled back as a whole: the canonical head is still the only live one.
  EXPECT_EQ(live_rosters(conn(), c, ch, relay), 1);
  EXPECT_TRUE(is_live(c, canonical));
  EXPECT_EQ(all_rows(c), 1);
}

TEST_F(RosterFenceTest, MalformedOrWrongMemberListsAreRefused) {
  auto c = community();
  const std::string ch = "room", relay = pk(901);
  const std::string a = pk(11), b = pk(12), gone = pk(13);
  add_channel(conn(), c, ch, a);
  put_member(conn(), c, ch, a, "owner");
  put_member(conn(), c, ch, b, "member");
  put_member(conn(), c, ch, gone, "member");
  remove_member(conn(), c, ch, gone);

  const std::string d = "[\"d\",\"" + ch + "\"]";
  auto p = [](const std::string& key, const std::string& role) {
    return "[\"p\",\"" + key + "\",\"\",\"" + role + "\"]";
  };
  std::string upper = a;
  std::transform(upper.begin(), upper.end(), upper.begin(), ::toupper);
  struct bad_case {
    const char* name;
    std::string tags;
    const char* reason;
  };
  const std::vector<bad_case> cases = {
    {"3 fields", "[" + d + ",[\"p\",\"" + a + "\",\"owner\"]," + p(b, "member") + "]", "exactly 4 fields"},
    {"5 fields", "[" + d + ",[\"p\",\"" + a + "\",\"\",\"owner\",\"x\"]," + p(b, "member") + "]",
     "exactly 4 fields"},
    {"uppercase hex", "[" + d + "," + p(upper, "owner") + "," + p(b, "member") + "]", "32-byte hex"},
    {"short hex", "[" + d + "," + p(a.substr(0, 62), "owner") + "," + p(b, "member") + "]",
     "32-byte hex"},
    {"unknown role", "[" + d + "," + p(a, "king") + "," + p(b, "member") + "]", "unknown role"},
    {"duplicate pubkey", "[" + d + "," + p(a, "owner") + "," + p(a, "owner") + "," + p(b, "member") + "]",
     "listed twice"},
    {"removed member listed", "[" + d + "," + p(a, "owner") + "," + p(b, "member") + "," + p(gone, "member") + "]",
     "members differ"},
    {"role differs", "[" + d + "," + p(a, "owner") + "," + p(b, "admin") + "]", "members differ"},
    {"member missing", "[" + d + "," + p(a, "owner") + "]", "members differ"},
    {"non-string relay field", "[" + d + ",[\"p\",\"" + a + "\",1,\"owner\"]," + p(b, "member") + "]",
     "relay field"},
  };
  for (const auto& bc : cases) {
    auto got = try_insert_roster(conn(), c, ch, relay, bc.tags);
    EXPECT_EQ(got.substr(0, 5), "23514") << bc.name << ": " << got;
    EXPECT_TRUE(contains(got, bc.reason)) << bc.name << ": " << got;
  }
  EXPECT_EQ(all_rows(c), 0);
  // The control: the same channel's correct list is stored.
  EXPECT_EQ(try_insert_roster(conn(), c, ch, relay,
                              "[" + d + "," + p(b, "member") + ",[\"t\",\"x\"]," + p(a, "owner") + "]"),
            "");
  EXPECT_EQ(live_rosters(conn(), c, ch, relay), 1);
}

TEST_F(RosterFenceTest, RosterOfAMissingOrDeletedChannelIsRefused) {
  auto c = community();
  const std::string relay = pk(902);
  auto got = try_insert_roster(conn(), c, "nowhere", relay, roster_tags("nowhere", {}));
  EXPECT_EQ(got.substr(0, 5), "23514") << got;
  EXPECT_TRUE(contains(got, "no such channel")) << got;

  add_channel(conn(), c, "gone", pk(21));
  {
    pqxx::work tx(conn());
    tx.exec_params("UPDATE channels SET deleted_at = now() WHERE community_id = $1 AND id = 'gone'", c);
    tx.commit();
  }
  got = try_insert_roster(conn(), c, "gone", relay, roster_tags("gone", {}));
  EXPECT_EQ(got.substr(0, 5), "23514") << got;
}

// ---- b. the comparison happens under the membership lock -------------------------------

TEST_F(RosterFenceTest, FenceWaitsForTheMembershipLockAndComparesAfterIt) {
  auto c = community();
  const std::string ch = "room", relay = pk(903);
  add_channel(conn(), c, ch, pk(31));
  put_member(conn(), c, ch, pk(31), "owner");
  put_member(conn(), c, ch, pk(32), "member");
  const auto snapshot = roster_tags(ch, {{pk(31), "owner"}, {pk(32), "member"}});
  const auto id = fresh_id();
  {
    // B's list is canonical when B starts.
    pqxx::nontransaction tx(conn());
    EXPECT_TRUE(tx.exec_params("SELECT waggle_roster_mismatch($1, $2, $3)", c, ch,
                               raw_of(id, relay, snapshot))[0][0]
                  .is_null());
  }

  auto conn_a = connect();
  auto conn_b = connect();
  int pid_b = 0;
  {
    pqxx::nontransaction tx(*conn_b);
    pid_b = tx.exec("SELECT pg_backend_pid()")[0][0].as<int>();
  }

  std::string b_result = "not run";  // outlives the thread that writes it
  std::jthread b;  // declared before tx_a: destroyed (joined) after tx_a lets go of the lock
  pqxx::work tx_a(*conn_a);
  tx_a.exec_params("SELECT pg_advisory_xact_lock(hashtextextended($1, 0))",
                   "waggle_membership:" + std::to_string(c) + ":" + ch);

  b = std::jthread([&] { b_result = try_insert_roster(*conn_b, c, ch, relay, snapshot, id); });

  // No ASSERT until B is joined: B may be blocked on A's lock.
  const bool waited = eventually([&] { return waits_on_advisory_lock(conn(), pid_b); });
  EXPECT_TRUE(waited) << "B's insert did not wait for the membership lock";

  put_member(tx_a, c, ch, pk(33), "member");
  tx_a.commit();
  b.join();

  EXPECT_EQ(b_result.substr(0, 5), "23514") << b_result;
  EXPECT_TRUE(contains(b_result, "members differ")) << b_result;
  EXPECT_EQ(live_rosters(conn(), c, ch, relay), 0);
  EXPECT_FALSE(exists(c, id));
  // With the lock free, the current list goes in.
  EXPECT_EQ(try_insert_roster(conn(), c, ch, relay,
                              roster_tags(ch, {{pk(31), "owner"}, {pk(32), "member"}, {pk(33), "member"}})),
            "");
}

// ---- c. start-up refusal -------------------------------------------------------------

// These tests change the trigger, so each gets a database of its own.
class RosterFenceStartupTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_FALSE(admin_url().empty()) << "WAGGLE_TEST_DATABASE_URL is not set";
    db_ = std::make_unique<scratch_database>("fence", scratch_database::content::migrated);
    conn_ = db_->connect();
    auto applied = db::apply_migrations(*conn_, db::embedded_migrations());
    ASSERT_TRUE(applied.has_value()) << applied.error().reason;
  }
  pqxx::connection& conn() { return *conn_; }
  void ddl(const std::string& sql) {
    pqxx::work tx(conn());
    tx.exec(sql);
    tx.commit();
  }
  // The fix the error names: run migrations/0003_roster_fence.sql again.
  void reapply_migration() {
    const auto sql = read_text(std::string(waggle::test_paths::source_dir) + "/migrations/0003_roster_fence.sql");
    ASSERT_FALSE(sql.empty());
    ddl(sql);
  }
  void expect_refused(const status& s, const std::string& what) {
    EXPECT_FALSE(s.ok()) << what;
    EXPECT_EQ(s.code, ec::internal) << what << ": " << s.reason;
    EXPECT_TRUE(contains(s.reason, db::roster_fence_migration)) << s.reason;
    EXPECT_TRUE(contains(s.reason, "re-apply migrations/0003_roster_fence.sql")) << s.reason;
    EXPECT_TRUE(contains(s.reason, "psql")) << s.reason;
    EXPECT_TRUE(contains(s.reason, what)) << "expected \"" << what << "\" in: " << s.reason;
  }
  std::unique_ptr<scratch_database> db_;
  std::unique_ptr<pqxx::connection> conn_;
};

TEST_F(RosterFenceStartupTest, FreshDatabasePasses) {
  auto s = db::check_roster_fence(conn());
  EXPECT_TRUE(s.ok()) << s.reason;
  EXPECT_TRUE(db::verify_roster_fence_catalog(conn()).ok());
  EXPECT_TRUE(db::probe_roster_fence(conn()).ok());
}

TEST_F(RosterFenceStartupTest, DroppedTriggerIsRefusedUntilTheMigrationIsReapplied) {
  ddl("DROP TRIGGER waggle_roster_fence ON events");
  expect_refused(db::check_roster_fence(conn()), "missing");
  expect_refused(db::verify_roster_fence_catalog(conn()), "missing");
  reapply_migration();
  auto s = db::check_roster_fence(conn());
  EXPECT_TRUE(s.ok()) << s.reason;
}

TEST_F(RosterFenceStartupTest, DisabledTriggerIsRefusedUntilTheMigrationIsReapplied) {
  ddl("ALTER TABLE events DISABLE TRIGGER waggle_roster_fence");
  expect_refused(db::check_roster_fence(conn()), "disabled");
  ddl("ALTER TABLE events ENABLE REPLICA TRIGGER waggle_roster_fence");
  expect_refused(db::check_roster_fence(conn()), "disabled");
  ddl("ALTER TABLE events ENABLE ALWAYS TRIGGER waggle_roster_fence");
  EXPECT_TRUE(db::check_roster_fence(conn()).ok());
  ddl("ALTER TABLE events DISABLE TRIGGER waggle_roster_fence");
  reapply_migration();
  auto s = db::check_roster_fence(conn());
  EXPECT_TRUE(s.ok()) << s.reason;
}

TEST_F(RosterFenceStartupTest, InertFunctionPassesTheCatalogButNotTheProbe) {
  ddl("CREATE OR REPLACE FUNCTION waggle_roster_fence() RETURNS trigger LANGUAGE plpgsql AS "
      "$$ BEGIN RETURN NEW; END $$");
  auto catalog = db::verify_roster_fence_catalog(conn());
  EXPECT_TRUE(catalog.ok()) << catalog.reason;
  expect_refused(db::probe_roster_fence(conn()), "inert");
  expect_refused(db::check_roster_fence(conn()), "a stale roster inserted");
  reapply_migration();
  auto s = db::check_roster_fence(conn());
  EXPECT_TRUE(s.ok()) << s.reason;
}

TEST_F(RosterFenceStartupTest, FunctionThatChecksWithoutTheMembershipLockIsRefused) {
  // The migration's own function minus its lock: it still refuses stale
  // lists, but compares with a membership that can change before commit.
  auto sql = read_text(std::string(waggle::test_paths::source_dir) + "/migrations/0003_roster_fence.sql");
  const std::string lock =
    "  PERFORM pg_advisory_xact_lock_shared(\n"
    "    hashtextextended('waggle_membership:' || NEW.community_id || ':' || coalesce(NEW.d_tag, ''), 0));\n";
  auto at = sql.find(lock);
  ASSERT_NE(at, std::string::npos) << "the lock statement of the migration changed; update this test";
  sql.erase(at, lock.size());
  ddl(sql);
  EXPECT_TRUE(db::verify_roster_fence_catalog(conn()).ok());
  expect_refused(db::probe_roster_fence(conn()), "does not take the channel's membership lock");
  reapply_migration();
  auto s = db::check_roster_fence(conn());
  EXPECT_TRUE(s.ok()) << s.reason;
}

TEST_F(RosterFenceStartupTest, TriggerOnAnotherFunctionOrTimingIsRefused) {
  ddl("CREATE FUNCTION not_the_fence() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RETURN NEW; END $$;"
      "DROP TRIGGER waggle_roster_fence ON events;"
      "CREATE TRIGGER waggle_roster_fence BEFORE INSERT ON events FOR EACH ROW "
      "EXECUTE FUNCTION not_the_fence()");
  expect_refused(db::check_roster_fence(conn()), "bound to another function");
  ddl("DROP TRIGGER waggle_roster_fence ON events;"
      "CREATE TRIGGER waggle_roster_fence AFTER INSERT ON events FOR EACH ROW "
      "EXECUTE FUNCTION waggle_roster_fence()");
  expect_refused(db::check_roster_fence(conn()), "wrong timing");
  ddl("DROP TRIGGER waggle_roster_fence ON events;"
      "CREATE TRIGGER waggle_roster_fence BEFORE INSERT ON events FOR EACH STATEMENT "
      "EXECUTE FUNCTION waggle_roster_fence()");
  expect_refused(db::check_roster_fence(conn()), "wrong timing");
  reapply_migration();
  auto s = db::check_roster_fence(conn());
  EXPECT_TRUE(s.ok()) << s.reason;
}

TEST_F(RosterFenceStartupTest, ReplicaSessionFiresNoTriggersAndIsRefused) {
  {
    pqxx::nontransaction tx(conn());
    tx.exec("SET session_replication_role = replica");
  }
  EXPECT_TRUE(db::verify_roster_fence_catalog(conn()).ok());
  expect_refused(db::probe_roster_fence(conn()), "session_replication_role = replica");
  {
    pqxx::nontransaction tx(conn());
    tx.exec("RESET session_replication_role");
  }
  EXPECT_TRUE(db::check_roster_fence(conn()).ok());
}

TEST_F(RosterFenceStartupTest, SessionNotAtReadCommittedIsRefused) {
  // Under REPEATABLE READ the trigger would compare with the membership of
  // the transaction's snapshot, older than its lock.
  for (const char* level : {"repeatable read", "serializable"}) {
    {
      pqxx::nontransaction tx(conn());
      tx.exec(std::string("SET default_transaction_isolation = '") + level + "'");
    }
    auto s = db::check_roster_fence(conn());
    EXPECT_FALSE(s.ok()) << level;
    EXPECT_TRUE(contains(s.reason, db::roster_fence_migration)) << s.reason;
    EXPECT_TRUE(contains(s.reason, std::string("run at ") + level)) << s.reason;
    EXPECT_TRUE(contains(s.reason, "read committed")) << s.reason;
  }
  {
    pqxx::nontransaction tx(conn());
    tx.exec("RESET default_transaction_isolation");
  }
  auto s = db::check_roster_fence(conn());
  EXPECT_TRUE(s.ok()) << s.reason;
}

TEST_F(RosterFenceStartupTest, ProbeLeavesNothingBehind) {
  auto counts = [&] {
    pqxx::nontransaction tx(conn());
    auto r = tx.exec(
      "SELECT (SELECT count(*) FROM communities), (SELECT count(*) FROM channels), "
      "(SELECT count(*) FROM channel_members), (SELECT count(*) FROM events), "
      "(SELECT count(*) FROM event_tags)")[0];
    std::vector<int64_t> out;
    for (const auto& f : r)
      out.push_back(f.as<int64_t>());
    return out;
  };
  const auto before = counts();
  for (int i = 0; i < 3; ++i) {
    auto s = db::check_roster_fence(conn());
    ASSERT_TRUE(s.ok()) << s.reason;
  }
  EXPECT_EQ(counts(), before);
  pqxx::nontransaction tx(conn());
  // No lock is left with the session, and it is not inside a transaction.
  EXPECT_EQ(tx.exec("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND pid = "
                    "pg_backend_pid()")[0][0]
              .as<int>(),
            0);
  EXPECT_EQ(tx.exec("SELECT now() = statement_timestamp()")[0][0].as<bool>(), true);
}

// ---- d. stale_rosters ---------------------------------------------------------------

TEST_F(RosterFenceTest, StaleRostersListsMissingAndTruncatedHeadsOfLiveChannels) {
  auto c = community();
  const std::string relay = pk(904), other = pk(905);
  for (const char* ch : {"canonical", "missing", "truncated", "deleted", "by-other", "head-deleted"}) {
    add_channel(conn(), c, ch, pk(41));
    put_member(conn(), c, ch, pk(41), "owner");
    put_member(conn(), c, ch, pk(42), "member");
  }
  auto full = [](const std::string& ch) {
    return roster_tags(ch, {{pk(41), "owner"}, {pk(42), "member"}});
  };
  ASSERT_EQ(try_insert_roster(conn(), c, "canonical", relay, full("canonical")), "");
  // Canonical, but signed by someone else: the relay's head is missing.
  ASSERT_EQ(try_insert_roster(conn(), c, "by-other", other, full("by-other")), "");
  // Canonical once, deleted since.
  const auto deleted_head = fresh_id();
  ASSERT_EQ(try_insert_roster(conn(), c, "head-deleted", relay, full("head-deleted"), deleted_head), "");
  {
    pqxx::work tx(conn());
    // A head that lost a member, written past the fence (as a restore or an
    // old node before 0003 could have).
    tx.exec("ALTER TABLE events DISABLE TRIGGER waggle_roster_fence, "
            "DISABLE TRIGGER waggle_roster_fence_at_commit");
    insert_roster(tx, c, "truncated", relay, roster_tags("truncated", {{pk(41), "owner"}}));
    tx.exec("ALTER TABLE events ENABLE TRIGGER waggle_roster_fence, "
            "ENABLE TRIGGER waggle_roster_fence_at_commit");
    tx.exec_params("UPDATE events SET deleted_at = now() WHERE community_id = $1 AND id = decode($2, 'hex')",
                   c, deleted_head);
    tx.exec_params("UPDATE channels SET deleted_at = now() WHERE community_id = $1 AND id = 'deleted'", c);
    tx.commit();
  }
  EXPECT_TRUE(db::verify_roster_fence_catalog(conn()).ok());

  std::vector<std::string> mine;
  for (const auto& [community_id, channel] : db::stale_rosters(conn(), relay))
    if (community_id == c)
      mine.push_back(channel);
  EXPECT_EQ(mine, (std::vector<std::string>{"by-other", "head-deleted", "missing", "truncated"}));

  // A membership change makes the canonical one stale too; a repair fixes it.
  put_member(conn(), c, "canonical", pk(43), "guest");
  mine.clear();
  for (const auto& [community_id, channel] : db::stale_rosters(conn(), relay))
    if (community_id == c)
      mine.push_back(channel);
  EXPECT_EQ(mine, (std::vector<std::string>{"by-other", "canonical", "head-deleted", "missing",
                                            "truncated"}));
  EXPECT_THROW(db::stale_rosters(conn(), "not-hex"), std::invalid_argument);
}

}  // namespace
}  // namespace waggle::pgtest
