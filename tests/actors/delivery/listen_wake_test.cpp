// The real listen actor, store and supervisor over a real PostgreSQL, under
// test_coordinator (docs/delivery.md): a committed mention is delivered on
// its notification, before any timer fires; the LISTEN connection's death
// is noticed and healed; a probe that never comes back declares it down.
// Only the HTTP client is a fake (the test answers it).

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <future>

#include <pqxx/pqxx>

#include "actors/delivery/delivery_store.hpp"
#include "actors/delivery/listen_actor.hpp"
#include "actors/delivery/listener_source.hpp"
#include "db/operator_outbox.hpp"
#include "tests/actors/delivery/delivery_fixture.hpp"
#include "tests/support/free_port.hpp"
#include "tests/support/pg_fixture.hpp"

namespace waggle::testing {
namespace {

using namespace std::chrono_literals;

const std::string listener_key = pgtest::make_event(7, 1, 1, {}, "").pubkey;
const std::string target(64, 'a');
const std::string url = "http://listener.example/wake";

class ListenWakeTest : public actor_test {
 protected:
  void SetUp() override {
    auto& s = pgtest::shared_db::get();
    ASSERT_TRUE(s.error.empty()) << s.error;
    db_url = s.db->url();
    conn = s.db->connect();
    static int n = 0;
    auto host = "listen-wake-" + std::to_string(::getpid()) + "-" + std::to_string(n++) + ".test";
    auto c = db::add_community(*conn, host, "t", community_policy::open);
    ASSERT_TRUE(c.has_value());
    community = c->id;
    db::register_listener_targets(*conn, community, listener_key, {target});
  }

  // The real pipeline; `wait` is how long one listen step may block.
  void start(std::chrono::milliseconds wait = 5000ms) {
    listen_settings ls;
    ls.listen_url = db_url;
    ls.probe_url = db_url;
    ls.node_id = "t" + std::to_string(::getpid());
    ls.wait = wait;
    ls.self_loop = false;
    start_listening(ls);
  }
  // The same with the listen actor's own settings.
  void start_listening(const listen_settings& ls) {
    auto source = std::make_shared<listener_source>(std::map<std::string, std::string>{
      {listener_key, url}});
    auto store = spawn(delivery_store_actor_impl, db_url, std::string{"test-store"},
                       std::static_pointer_cast<delivery_source>(source), env);
    delivery_settings ds;
    ds.relay_secret = std::string(63, '0') + "9";  // any 64 hex works as a key here
    supervisor = spawn(delivery_supervisor_actor_impl, store, http, ds, env);
    listener = spawn(listen_actor_impl, supervisor, ls, env, push_matcher_actor{});
    run();
  }
  void step() {
    caf::anon_send(listener, listen_tick{});
    run();
  }
  proto::event commit_mention(int64_t at) {
    auto ev = pgtest::make_event(1, 9, at, {{"p", target}}, "hey agent");
    auto r = db::write_batch(*conn, pgtest::batch(community, {ev}));
    EXPECT_EQ(r.at(0).outcome, write_outcome::stored);
    return ev;
  }
  int listen_backend() {
    pqxx::nontransaction tx(*conn);
    auto r = tx.exec_params("SELECT pid FROM pg_stat_activity WHERE datname = current_database() "
                            "AND query LIKE 'LISTEN%' AND pid <> pg_backend_pid()");
    return r.empty() ? 0 : r[0][0].as<int>();
  }

  std::string db_url;
  std::unique_ptr<pqxx::connection> conn;
  int64_t community = 0;
  node_env env = test_env();
  std::shared_ptr<fake_http_client> http = std::make_shared<fake_http_client>();
  delivery_supervisor_actor supervisor;
  listen_actor listener;
};

// Must-show 2: no timer is ever triggered here, so the only way the POST can
// go out is the notification the commit sent.
TEST_F(ListenWakeTest, CommittedMentionIsDeliveredOnItsNotification) {
  start();
  step();  // connects, LISTENs, catches up (nothing yet), probe comes back
  EXPECT_EQ(env.stats->listener_up.load(), 1);
  ASSERT_EQ(http->posted, 0u);
  auto ev = commit_mention(1000);
  step();  // the notification
  ASSERT_EQ(http->posted, 1u);
  const auto& body = http->pending.front().request.body;
  EXPECT_NE(body.find(ev.id), std::string::npos);
  EXPECT_NE(body.find("\"target\":\"" + target + "\""), std::string::npos);
  http->answer(200);
  run();
  pqxx::nontransaction tx(*conn);
  EXPECT_EQ(tx.exec_params("SELECT count(*) FROM operator_listener_outbox WHERE community_id = $1",
                           community)[0][0].as<int>(),
            0);
}

// pg_terminate_backend of the LISTEN backend: the next step notices, the one
// after reconnects and catches up, and a later mention is delivered on its
// notification again.
TEST_F(ListenWakeTest, TerminatedListenBackendIsReplacedAndCatchesUp) {
  start(500ms);
  step();
  ASSERT_EQ(env.stats->listener_up.load(), 1);
  auto pid = listen_backend();
  ASSERT_NE(pid, 0);
  {
    pqxx::nontransaction tx(*conn);
    tx.exec_params("SELECT pg_terminate_backend($1)", pid);
  }
  commit_mention(2000);  // while nobody listens: only the catch-up finds it
  step();                // the broken connection is noticed
  EXPECT_EQ(env.stats->listener_up.load(), 0);
  sched().advance_time(200ms);  // past the reconnect backoff (steady clock of the test)
  run();
  step();  // reconnects: catch-up claim
  EXPECT_EQ(http->posted, 1u);
  http->answer(200);
  run();
  commit_mention(2001);
  step();
  EXPECT_EQ(http->posted, 2u);
  EXPECT_EQ(env.stats->listener_up.load(), 1);
}

// A LISTEN connection that never delivers (as through a pooler in
// transaction mode): here a probe channel nobody NOTIFYs on the LISTEN side
// is simulated by a probe timeout shorter than a step.
TEST_F(ListenWakeTest, ProbeThatNeverComesBackDeclaresTheListenerDown) {
  listen_settings ls;
  ls.listen_url = db_url;
  // The probe goes to another database's server process: never heard here.
  ls.probe_url = pgtest::admin_url();
  ls.node_id = "lost" + std::to_string(::getpid());
  ls.wait = 50ms;
  ls.probe_timeout = 1000ms;
  ls.self_loop = false;
  start_listening(ls);
  step();
  EXPECT_EQ(env.stats->listener_up.load(), 0);
  sched().advance_time(1001ms);
  run();
  step();
  EXPECT_EQ(env.stats->listener_up.load(), 0);
  // Deliveries go on by polling: a mention committed now is claimed by the
  // supervisor's floor poll (250 ms), notification or not.
  commit_mention(3000);
  sched().advance_time(250ms);
  run();
  EXPECT_GE(http->posted, 1u);
}

// Issue 34 (listener probes without connect_timeout): a LISTEN server that
// takes the TCP connection and then says nothing (a host gone silent, a
// pooler stuck) held this actor's only thread in libpq's connect with no
// bound, so no probe was judged and the mailbox was never read. Now the
// connect gives up after connect_timeout (2 s) and the step ends. The port
// below is listened on and never accepted: the kernel completes the
// handshake, the startup packet is never answered.
TEST_F(ListenWakeTest, ASilentListenServerDoesNotHoldTheActorsThread) {
  auto port = e2e::free_port();
  ASSERT_NE(port, 0);
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  ASSERT_EQ(::listen(fd, 16), 0);
  listen_settings ls;
  ls.listen_url = "postgresql://postgres@127.0.0.1:" + std::to_string(port) + "/silent";
  ls.probe_url = db_url;
  ls.node_id = "silent" + std::to_string(::getpid());
  ls.wait = 50ms;
  ls.self_loop = false;
  start_listening(ls);
  auto stepped = std::async(std::launch::async, [this] { step(); });
  // Generous: the bound is 2 s; without one the step never ends.
  bool ended = stepped.wait_for(20s) == std::future_status::ready;
  ::close(fd);  // resets the pending connection, so a step still blocked ends now
  stepped.get();
  EXPECT_TRUE(ended) << "the listen step was still connecting after 20 s";
  EXPECT_EQ(env.stats->listener_up.load(), 0);
}

}  // namespace
}  // namespace waggle::testing
