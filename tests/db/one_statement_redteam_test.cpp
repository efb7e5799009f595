// Red-team checks of the one-statement write (issue 16; db/event_write.cpp,
// write_batch's run_single path, write_sql::sql_check_insert). Each test
// attacks one guarantee the autocommit statement must keep from the phases:
// - every S1 row ('x' duplicate, 't' NIP-09 tombstone, 'p' community
//   refusal) is honoured in a plain batch, with in-batch repeats answered once;
// - decide() routes no non-plain shape (coordinate, kind 5, channel, push
//   kind, a mixed batch) through the statement;
// - an error raised at COMMIT (after the statement's CommandComplete was
//   sent, before ReadyForQuery) is never answered `stored`;
// - a concurrent insert of the same id and a poison event in one batch: the
//   others get their real outcome;
// - the ambiguous commit: the statement committed, its result never came
//   back: every item `failed`, nothing lost, the resend is a duplicate.

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <set>
#include <thread>

#include "db/statistics.hpp"
#include "tests/db/write_fixture.hpp"

namespace waggle::pgtest {
namespace {

// The prepared statements a connection has registered with the server (libpqxx
// registers one on its first use), i.e. the statements its batches ran.
std::set<std::string> statements_run(pqxx::connection& c) {
  pqxx::nontransaction tx(c);
  std::set<std::string> out;
  for (const auto& r : tx.exec("SELECT name FROM pg_prepared_statements"))
    out.insert(r[0].as<std::string>());
  return out;
}

class RedTeamOneStatement : public WriteTest {
 protected:
  std::unique_ptr<pqxx::connection> writer() {
    auto w = connect();
    for (const auto& setting : db::writer_session_settings())
      pqxx::nontransaction{*w}.exec(setting);
    return w;
  }
  void sql(const std::string& text) { pqxx::nontransaction{conn()}.exec(text); }
};

// Every row S1 can answer for a plain candidate, in ONE plain batch run by the
// statement: the statement must insert exactly what decide() answers stored.
TEST_F(RedTeamOneStatement, EveryCheckRowIsHonouredInOnePlainBatch) {
  auto c = community();
  auto stored_before = make_event(70, 1, 1000, {}, "stored before");
  auto tombstoned = make_event(71, 1, 1000, {}, "deleted before it arrived");
  auto deletion = make_event(71, 5, 2000, {{"e", tombstoned.id}});
  auto others_deletion_target = make_event(72, 1, 1000, {}, "deleted by a stranger");
  auto strangers_deletion = make_event(71, 5, 2000, {{"e", others_deletion_target.id}});
  auto banned = make_event(73, 1, 1000, {}, "from a banned key");
  auto fresh = make_event(74, 1, 1000, {{"t", "fresh"}}, "fresh");
  ASSERT_EQ(write1(c, stored_before), write_outcome::stored);
  ASSERT_EQ(write(c, {deletion, strangers_deletion}).at(0).outcome, write_outcome::stored);
  sql("INSERT INTO community_banned_pubkeys (community_id, pubkey) VALUES (" + std::to_string(c) +
      ", decode('" + banned.pubkey + "', 'hex'))");

  auto w = writer();
  auto r = db::write_batch_bisecting(
    *w, batch(c, {fresh, stored_before, tombstoned, banned, others_deletion_target, fresh,
                  stored_before, tombstoned}));
  auto ran = statements_run(*w);
  EXPECT_TRUE(ran.count("waggle_ev_check_insert")) << "the batch did not take the one statement";
  EXPECT_FALSE(ran.count("waggle_ev_check")) << "the batch took the phases";
  ASSERT_EQ(r.size(), 8u);
  const write_outcome want[] = {write_outcome::stored,     write_outcome::duplicate,
                                write_outcome::superseded, write_outcome::blocked,
                                write_outcome::stored,     write_outcome::duplicate,
                                write_outcome::duplicate,  write_outcome::superseded};
  for (size_t i = 0; i < r.size(); ++i)
    EXPECT_EQ(r[i].outcome, want[i]) << "item " << i << ": " << outcome_name(r[i].outcome) << " "
                                     << r[i].reason;
  EXPECT_FALSE(exists(c, tombstoned.id));
  EXPECT_FALSE(exists(c, banned.id));
  EXPECT_TRUE(is_live(c, fresh.id));
  EXPECT_TRUE(is_live(c, others_deletion_target.id));
  EXPECT_EQ(tag_rows(c, fresh.id), 1);
}

// decide() must never send a non-plain shape through the statement (it would
// skip S0, S2, S4..S7): each shape alone and next to a plain event.
TEST_F(RedTeamOneStatement, NoNonPlainShapeTakesTheOneStatement) {
  auto c = community();
  auto target = make_event(80, 1, 1000);
  std::string someone(64, 'a');
  struct shape {
    const char* what;
    proto::event ev;
  };
  int n = 0;
  auto shapes = [&] {
    ++n;  // distinct ids per round
    return std::vector<shape>{
      {"kind 0", make_event(81, 0, 1000 + n)},
      {"kind 3", make_event(81, 3, 1000 + n)},
      {"kind 10002", make_event(81, 10002, 1000 + n)},
      {"kind 19999", make_event(81, 19999, 1000 + n)},
      {"kind 30023", make_event(81, 30023, 1000 + n, {{"d", "x"}})},
      {"kind 39999", make_event(81, 39999, 1000 + n)},
      {"kind 5 e", make_event(80, 5, 2000 + n, {{"e", target.id}})},
      {"kind 5 a", make_event(81, 5, 2000 + n, {{"a", "30023:" + someone + ":x"}})},
      {"h tag", make_event(81, 1, 1000 + n, {{"h", "general"}})},
      {"kind 9 p", make_event(81, 9, 1000 + n, {{"p", someone}})},
      {"kind 9", make_event(81, 9, 1000 + n)},
      {"kind 40002 p", make_event(81, 40002, 1000 + n, {{"p", someone}})},
      {"kind 45001", make_event(81, 45001, 1000 + n)},
      {"kind 45003 p", make_event(81, 45003, 1000 + n, {{"p", someone}})},
    };
  };
  ASSERT_EQ(write1(c, target), write_outcome::stored);
  // The detector works: a plain batch does register the statement.
  {
    auto w = writer();
    db::write_batch_bisecting(*w, batch(c, {make_event(82, 1, 1000), make_event(82, 7, 1000)}));
    ASSERT_TRUE(statements_run(*w).count("waggle_ev_check_insert"));
  }
  for (const auto& s : shapes()) {
    auto w = writer();
    auto r = db::write_batch_bisecting(*w, batch(c, {s.ev}));
    EXPECT_FALSE(statements_run(*w).count("waggle_ev_check_insert"))
      << s.what << " alone took the one statement (" << outcome_name(r.at(0).outcome) << ")";
  }
  for (const auto& s : shapes()) {
    auto w = writer();
    auto plain = make_event(83, 1, 1000 + n, {}, s.what);
    auto r = db::write_batch_bisecting(*w, batch(c, {plain, s.ev}));
    EXPECT_FALSE(statements_run(*w).count("waggle_ev_check_insert"))
      << s.what << " next to a plain event took the one statement";
    EXPECT_EQ(r.at(0).outcome, write_outcome::stored) << s.what << ": " << r.at(0).reason;
  }
  // The kind-5 by e of the first round did delete its target.
  EXPECT_FALSE(is_live(c, target.id));
}

// In autocommit the statement's CommandComplete is sent before its COMMIT
// (at Sync): an error raised at COMMIT (here a deferred constraint trigger,
// as the roster fence has) must fail the statement, never read as `stored`.
TEST_F(RedTeamOneStatement, AnErrorAtCommitIsNeverAnsweredStored) {
  auto c = community();
  sql(R"sql(
CREATE OR REPLACE FUNCTION redteam_refuse_at_commit() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  RAISE EXCEPTION 'refused at commit' USING ERRCODE = 'check_violation';
END $$;
DROP TRIGGER IF EXISTS redteam_refuse_at_commit ON events;
CREATE CONSTRAINT TRIGGER redteam_refuse_at_commit AFTER INSERT ON events
  DEFERRABLE INITIALLY DEFERRED FOR EACH ROW
  WHEN (NEW.raw LIKE '%redteam-refuse-at-commit%')
  EXECUTE FUNCTION redteam_refuse_at_commit();
)sql");
  auto good = make_event(84, 1, 1000, {}, "good");
  auto poison = make_event(84, 1, 1001, {}, "redteam-refuse-at-commit");
  auto good2 = make_event(85, 1, 1000, {}, "good too");
  auto w = writer();
  std::vector<write_result> r;
  std::string err;
  try {
    r = db::write_batch_bisecting(*w, batch(c, {good, poison, good2}));
  } catch (const std::exception& e) {
    err = e.what();
  }
  auto ran = statements_run(*w);
  sql("DROP TRIGGER redteam_refuse_at_commit ON events");
  ASSERT_TRUE(err.empty()) << err;
  EXPECT_TRUE(ran.count("waggle_ev_check_insert"));
  ASSERT_EQ(r.size(), 3u);
  EXPECT_EQ(r[0].outcome, write_outcome::stored) << r[0].reason;
  EXPECT_EQ(r[1].outcome, write_outcome::rejected) << outcome_name(r[1].outcome) << " " << r[1].reason;
  EXPECT_EQ(r[2].outcome, write_outcome::stored) << r[2].reason;
  EXPECT_FALSE(exists(c, poison.id));
  EXPECT_EQ(all_rows(c), 2);
}

// Another session inserts the same id (uncommitted) while a plain batch that
// also holds a poison event (invalid UTF-8 in a tag: 22021) runs: the batch
// waits, the holder commits, the poison is bisected away; the shared id is a
// duplicate and the third event is stored, never `failed` nor a false stored.
TEST_F(RedTeamOneStatement, ASameIdRaceAndAPoisonInOneBatch) {
  auto c = community();
  auto shared = make_event(86, 1, 1000, {{"t", "shared"}});
  auto poison = make_event(86, 1, 1001, {{"x", "\xff\xfe"}});
  auto other = make_event(87, 1, 1000, {{"t", "other"}});
  auto holder = connect();
  std::optional<pqxx::work> held;
  held.emplace(*holder);
  ASSERT_EQ(db::write_events(*held, batch(c, {shared})).at(0).outcome, write_outcome::stored);
  auto w = writer();
  int pid = w->backendpid();
  std::vector<write_result> r;
  std::string err;
  std::thread t([&] {
    try {
      r = db::write_batch_bisecting(*w, batch(c, {shared, poison, other}));
    } catch (const std::exception& e) {
      err = e.what();
    }
  });
  bool waited = eventually([&] {
    pqxx::nontransaction tx(conn());
    return !tx.exec_params("SELECT 1 FROM pg_stat_activity WHERE pid = $1 AND state = 'active' "
                           "AND wait_event_type = 'Lock'",
                           pid)
              .empty();
  });
  held->commit();
  t.join();
  ASSERT_TRUE(waited) << "the batch never waited for the holder";
  ASSERT_TRUE(err.empty()) << err;
  ASSERT_EQ(r.size(), 3u);
  EXPECT_EQ(r[0].outcome, write_outcome::duplicate) << outcome_name(r[0].outcome) << " " << r[0].reason;
  EXPECT_EQ(r[1].outcome, write_outcome::rejected) << outcome_name(r[1].outcome) << " " << r[1].reason;
  EXPECT_EQ(r[2].outcome, write_outcome::stored) << outcome_name(r[2].outcome) << " " << r[2].reason;
  EXPECT_EQ(all_rows(c), 2);
  EXPECT_EQ(tag_rows(c, shared.id), 1);
  EXPECT_EQ(tag_rows(c, other.id), 1);
}

// A TCP relay between a client and PostgreSQL that can hold back the
// server's replies and then cut both sides: the statement reaches the server
// and commits, its result never reaches the client.
class cutting_proxy {
 public:
  explicit cutting_proxy(int target_port) : target_port_(target_port) {
    listen_fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = 0;
    ::bind(listen_fd_, reinterpret_cast<sockaddr*>(&a), sizeof a);
    ::listen(listen_fd_, 1);
    socklen_t len = sizeof a;
    ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&a), &len);
    port_ = ntohs(a.sin_port);
    thread_ = std::thread([this] { run(); });
  }
  ~cutting_proxy() {
    cut();
    thread_.join();
    ::close(listen_fd_);
  }
  int port() const { return port_; }
  void hold_replies() { hold_ = true; }
  void cut() { stop_ = true; }
  size_t held_bytes() const { return held_; }

 private:
  void run() {
    pollfd l{listen_fd_, POLLIN, 0};
    while (!stop_ && ::poll(&l, 1, 20) <= 0) {
    }
    if (stop_)
      return;
    int client = ::accept(listen_fd_, nullptr, nullptr);
    int server = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons(static_cast<uint16_t>(target_port_));
    if (::connect(server, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0)
      stop_ = true;
    char buf[65536];
    while (!stop_) {
      pollfd p[2] = {{client, POLLIN, 0}, {server, POLLIN, 0}};
      if (::poll(p, 2, 20) <= 0)
        continue;
      if (p[0].revents) {
        auto n = ::read(client, buf, sizeof buf);
        if (n <= 0 || ::write(server, buf, static_cast<size_t>(n)) != n)
          break;
      }
      if (p[1].revents) {
        auto n = ::read(server, buf, sizeof buf);
        if (n <= 0)
          break;
        if (hold_)
          held_ += static_cast<size_t>(n);
        else if (::write(client, buf, static_cast<size_t>(n)) != n)
          break;
      }
    }
    ::shutdown(client, SHUT_RDWR);
    ::close(client);
    ::close(server);
  }
  int target_port_;
  int listen_fd_ = -1;
  int port_ = 0;
  std::atomic<bool> hold_{false}, stop_{false};
  std::atomic<size_t> held_{0};
  std::thread thread_;
};

// "host:port/db" out of postgresql://user@host:port/db?...
int port_of(const std::string& url) {
  auto at = url.find('@');
  auto colon = url.find(':', at);
  return std::stoi(url.substr(colon + 1, url.find('/', colon) - colon - 1));
}
std::string via_port(const std::string& url, int port) {
  auto at = url.find('@');
  auto colon = url.find(':', at);
  return url.substr(0, colon + 1) + std::to_string(port) + url.substr(url.find('/', colon));
}

TEST_F(RedTeamOneStatement, AResultLostAfterCommitIsFailedThenADuplicate) {
  auto c = community();
  ASSERT_NE(url().find("@127.0.0.1:"), std::string::npos) << "needs a TCP URL: " << url();
  cutting_proxy proxy(port_of(url()));
  pqxx::connection w(via_port(url(), proxy.port()));
  for (const auto& setting : db::writer_session_settings())
    pqxx::nontransaction{w}.exec(setting);
  // Warm: the statement is registered, so the next batch is one round trip.
  ASSERT_EQ(db::write_batch_bisecting(w, batch(c, {make_event(88, 1, 999)})).at(0).outcome,
            write_outcome::stored);
  auto a = make_event(88, 1, 1000, {{"t", "a"}});
  auto b = make_event(89, 1, 1000);
  proxy.hold_replies();
  std::vector<write_result> r;
  bool unavailable = false;
  std::string err;
  std::thread t([&] {
    try {
      r = db::write_batch_bisecting(w, batch(c, {a, b}));
    } catch (const db::batch_unavailable& e) {
      unavailable = true;
      r = e.results();
    } catch (const std::exception& e) {
      err = e.what();
    }
  });
  // Committed (visible to another session) while its result is held back.
  bool committed = eventually([&] { return exists(c, a.id) && exists(c, b.id); });
  proxy.cut();
  t.join();
  ASSERT_TRUE(committed) << "the statement never committed behind the proxy";
  ASSERT_TRUE(err.empty()) << err;
  EXPECT_TRUE(unavailable);
  ASSERT_EQ(r.size(), 2u);
  for (const auto& x : r)
    EXPECT_EQ(x.outcome, write_outcome::failed) << outcome_name(x.outcome) << " " << x.reason;
  // Nothing lost: the resend on a new connection is acknowledged as a duplicate.
  auto again = db::write_batch_bisecting(*writer(), batch(c, {a, b}));
  EXPECT_EQ(again.at(0).outcome, write_outcome::duplicate);
  EXPECT_EQ(again.at(1).outcome, write_outcome::duplicate);
  EXPECT_EQ(tag_rows(c, a.id), 1);
}

}  // namespace
}  // namespace waggle::pgtest
