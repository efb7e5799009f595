// Regressions from the independent red-team review of docs/channels.md:
//
//  (E1, the stale grant, lives in tests/actors/connection/connection_channels_test.cpp.)
//
//  E2 (side effects of an in-doubt command): a removal whose COMMIT succeeded
//     but whose outcome the group session could not read (the connection
//     broke during COMMIT) is answered `failed`; the client retries and gets
//     `duplicate`. The group actor now treats both as uncertain: it revokes
//     what the command could have ended and republishes the roster. Real
//     group actor, group session, hub, reader and connection actor over
//     PostgreSQL; a TCP proxy cuts the group session's connection right after
//     forwarding COMMIT.

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <mutex>
#include <thread>

#include "actors/connection/connection_actor.hpp"
#include "actors/fanout/hub_actor.hpp"
#include "actors/channels/group_actor.hpp"
#include "actors/channels/group_session.hpp"
#include "actors/reads/reader_pool.hpp"
#include "actors/reads/reader_session.hpp"
#include "db/group_store.hpp"
#include "messages/register_types.hpp"
#include "messages/proto/client_message.hpp"
#include "messages/proto/nip29.hpp"
#include "tests/actors/actor_fixture.hpp"
#include "tests/support/pg_fixture.hpp"
#include "tests/support/event_builder.hpp"

using namespace waggle;
using namespace std::chrono_literals;

namespace {

constexpr int64_t t0 = 1'700'000'000;

proto::event make_ev(const std::string& sk, int32_t kind, std::vector<proto::tag> tags = {},
                     std::string content = "", int64_t at = t0) {
  return test::event_builder{sk}.kind(kind).tags(std::move(tags)).content(std::move(content))
    .at(at).sign();
}

// ---- E2 --------------------------------------------------------------------------------

// A TCP proxy that, once armed, forwards the next client message containing
// COMMIT, drops everything the server answers from then on, waits for the
// server to commit, and closes both sides: the client sees its connection
// break during COMMIT (libpqxx: in_doubt_error) although the commit happened.
class cutting_proxy {
 public:
  explicit cutting_proxy(int target_port) : target_port_(target_port) {
    listen_fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    int one = 1;
    ::setsockopt(listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = 0;
    ::bind(listen_fd_, reinterpret_cast<sockaddr*>(&a), sizeof a);
    ::listen(listen_fd_, 16);
    socklen_t len = sizeof a;
    ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&a), &len);
    port_ = ntohs(a.sin_port);
    acceptor_ = std::thread([this] { accept_loop(); });
  }
  ~cutting_proxy() {
    stopping_ = true;
    ::shutdown(listen_fd_, SHUT_RDWR);
    ::close(listen_fd_);
    {
      std::lock_guard lk(m_);
      for (int fd : fds_)
        ::shutdown(fd, SHUT_RDWR);
    }
    acceptor_.join();
    for (auto& t : pumps_)
      t.join();
    for (int fd : fds_)
      ::close(fd);
  }
  int port() const { return port_; }
  void arm() { armed_ = true; }
  bool cut() const { return cut_; }

 private:
  struct link {
    int client = -1, server = -1;
    std::atomic<bool> blackhole{false};
  };
  void accept_loop() {
    while (!stopping_) {
      int c = ::accept(listen_fd_, nullptr, nullptr);
      if (c < 0)
        return;
      int s = ::socket(AF_INET, SOCK_STREAM, 0);
      sockaddr_in a{};
      a.sin_family = AF_INET;
      a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
      a.sin_port = htons(static_cast<uint16_t>(target_port_));
      if (::connect(s, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
        ::close(c);
        ::close(s);
        continue;
      }
      auto l = std::make_shared<link>();
      l->client = c;
      l->server = s;
      std::lock_guard lk(m_);
      fds_.push_back(c);
      fds_.push_back(s);
      pumps_.emplace_back([this, l] { client_to_server(l); });
      pumps_.emplace_back([this, l] { server_to_client(l); });
    }
  }
  void client_to_server(std::shared_ptr<link> l) {
    char buf[65536];
    for (;;) {
      ssize_t n = ::recv(l->client, buf, sizeof buf, 0);
      if (n <= 0)
        break;
      bool commit = armed_ && ::memmem(buf, static_cast<size_t>(n), "COMMIT", 6) != nullptr;
      if (commit) {
        armed_ = false;
        l->blackhole = true;
      }
      if (::send(l->server, buf, static_cast<size_t>(n), MSG_NOSIGNAL) != n)
        break;
      if (commit) {
        std::this_thread::sleep_for(500ms);  // the server commits and answers into the void
        cut_ = true;
        break;
      }
    }
    ::shutdown(l->client, SHUT_RDWR);
    ::shutdown(l->server, SHUT_RDWR);
  }
  void server_to_client(std::shared_ptr<link> l) {
    char buf[65536];
    for (;;) {
      ssize_t n = ::recv(l->server, buf, sizeof buf, 0);
      if (n <= 0)
        break;
      if (l->blackhole)
        continue;
      if (::send(l->client, buf, static_cast<size_t>(n), MSG_NOSIGNAL) != n)
        break;
    }
    ::shutdown(l->client, SHUT_RDWR);
    ::shutdown(l->server, SHUT_RDWR);
  }

  int target_port_;
  int listen_fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stopping_{false}, armed_{false}, cut_{false};
  std::thread acceptor_;
  std::mutex m_;
  std::vector<std::thread> pumps_;
  std::vector<int> fds_;
};

// The URL's host:port replaced by 127.0.0.1:<port>.
std::string via_port(const std::string& url, int port) {
  auto scheme = url.find("://");
  auto at = url.find('@', scheme + 3);
  auto host_start = (at == std::string::npos ? scheme + 3 : at + 1);
  auto host_end = url.find('/', host_start);
  return url.substr(0, host_start) + "127.0.0.1:" + std::to_string(port) + url.substr(host_end);
}

int port_of(const std::string& url) {
  auto scheme = url.find("://");
  auto at = url.find('@', scheme + 3);
  auto host_start = (at == std::string::npos ? scheme + 3 : at + 1);
  auto host_end = url.find('/', host_start);
  auto colon = url.rfind(':', host_end);
  if (colon == std::string::npos || colon < host_start)
    return 5432;
  return std::stoi(url.substr(colon + 1, host_end - colon - 1));
}

struct locked_sink : socket_sink {
  std::mutex m;
  std::vector<std::string> frames;
  std::optional<uint16_t> close_code;
  void send_text(std::string f) override {
    std::lock_guard lk(m);
    frames.push_back(std::move(f));
  }
  void close(uint16_t code, std::string) override {
    std::lock_guard lk(m);
    close_code = code;
  }
  std::vector<std::string> all() {
    std::lock_guard lk(m);
    return frames;
  }
};

bool any_contains(const std::vector<std::string>& frames, const std::string& needle) {
  for (auto& f : frames)
    if (f.find(needle) != std::string::npos)
      return true;
  return false;
}

bool eventually(const std::function<bool()>& cond, std::chrono::milliseconds d = 10s) {
  auto until = std::chrono::steady_clock::now() + d;
  while (std::chrono::steady_clock::now() < until) {
    if (cond())
      return true;
    std::this_thread::sleep_for(10ms);
  }
  return cond();
}

int64_t wall_now() {
  return std::chrono::duration_cast<std::chrono::seconds>(
           std::chrono::system_clock::now().time_since_epoch())
    .count();
}

// Interleaving:
//  1. member 3 has a granted live subscription {#h:[priv]} (priv is private).
//  2. owner 1 sends 9001 (remove 3). The group session runs it; COMMIT reaches
//     the server and commits; the connection breaks before the answer:
//     in_doubt_error -> `failed` -> "OK false error: ..." to the owner.
//     after_commit does not run: no channel_revoked, no roster_dirty.
//  3. the owner's client retries the same event: `duplicate` -> "OK true
//     duplicate: ..." (the removal is acknowledged). Still no side effect.
//  4. a post in priv committed after that OK reaches member 3's subscription,
//     and the live 39002 still lists member 3 (until some later change or a
//     node restart).
TEST(ChannelRegressionE2E, E2_an_in_doubt_removal_is_still_revoked_and_republished) {
  auto& shared = pgtest::shared_db::get();
  ASSERT_TRUE(shared.error.empty()) << shared.error;
  const std::string url = shared.db->url();
  auto direct = shared.db->connect();
  auto cr = db::add_community(*direct, "redteam-indoubt.test", "", community_policy::open);
  ASSERT_TRUE(cr.has_value());
  const int64_t c = cr->id;
  const std::string owner_sk = pgtest::secret(1), member_sk = pgtest::secret(3);
  const std::string member = proto::pubkey_of(member_sk);
  db::relay_signer signer{pgtest::secret(900), proto::pubkey_of(pgtest::secret(900))};
  {
    auto mk = [&](int32_t kind, std::vector<proto::tag> tags) {
      return std::make_shared<const proto::event>(
        make_ev(owner_sk, kind, std::move(tags), "", wall_now()));
    };
    ASSERT_EQ(db::apply_group_command(*direct, c, mk(9007, {{"h", "priv"}, {"private"}})).result.outcome,
              write_outcome::stored);
    ASSERT_EQ(db::apply_group_command(*direct, c, mk(9000, {{"h", "priv"}, {"p", member, "member"}}))
                .result.outcome,
              write_outcome::stored);
    ASSERT_FALSE(db::publish_roster(*direct, c, "priv", signer, wall_now()).events.empty());
  }

  cutting_proxy proxy(port_of(url));
  caf::actor_system_config cfg;
  register_types(cfg);
  cfg.set("logger.verbosity", caf::atom("quiet"));
  caf::actor_system sys{cfg};
  node_env env;
  env.sources.unix_now = [] { return wall_now(); };
  env.sources.random_challenge = [] { return std::string("challenge-1"); };
  env.sources.steady_now = [] { return std::chrono::steady_clock::now(); };
  env.stats = std::make_shared<waggle::metrics>();

  auto hub = sys.spawn(hub_actor_impl, env);
  proto::filter_limits limits;
  auto reader_session = sys.spawn<caf::detached>(reader_session_actor_impl, url,
                                                 std::string("reader-0"), limits, int64_t{5000},
                                                 env, std::shared_ptr<route_context>{});
  auto reader = sys.spawn(reader_pool_actor_impl, std::vector<reader_session_actor>{reader_session},
                          env);
  auto session = sys.spawn<caf::detached>(group_session_actor_impl, via_port(url, proxy.port()),
                                          signer, env, std::string("group_session"));
  auto group = sys.spawn(group_actor_impl, std::vector<group_session_actor>{session}, hub, env,
                         group_settings{});
  auto ingest_log = std::make_shared<waggle::testing::fake_ingest_log>();
  auto ingest = sys.spawn(waggle::testing::fake_ingest, ingest_log);

  connection_settings settings;
  settings.community_id = c;
  settings.host = "chat.example";
  settings.relay_pubkey = signer.pubkey;
  auto sink = std::make_shared<locked_sink>();
  auto conn = sys.spawn(connection_actor_impl, settings,
                        connection_peers{caf::actor_cast<ingest_actor>(ingest), hub, reader, group, {}, {}},
                        env, sink);
  auto auth = make_ev(member_sk, 22242, {{"relay", "ws://chat.example/"}, {"challenge", "challenge-1"}},
                      "", wall_now());
  caf::anon_send(conn, socket_frame{"[\"AUTH\"," + auth.raw + "]"});
  caf::anon_send(conn, socket_frame{R"(["REQ","s",{"#h":["priv"]}])"});
  const bool eose = eventually([&] { return any_contains(sink->all(), "[\"EOSE\",\"s\"]"); });

  caf::scoped_actor self{sys};
  auto removal = std::make_shared<const proto::event>(
    make_ev(owner_sk, 9001, {{"h", "priv"}, {"p", member}}, "", wall_now()));
  auto ask = [&] {
    ingest_reply out{write_outcome::failed, "no answer"};
    self->request(group, caf::infinite, group_request{c, removal})
      .receive([&](ingest_reply& r) { out = r; },
               [&](caf::error& e) { out = {write_outcome::failed, caf::to_string(e)}; });
    return out;
  };
  proxy.arm();
  auto first = ask();
  const bool was_cut = proxy.cut();
  bool removed_in_db = false;
  {
    pqxx::nontransaction tx(*direct);
    removed_in_db = !tx.exec_params(
                         "SELECT 1 FROM channel_members WHERE community_id = $1 AND channel_id = 'priv' "
                         "AND pubkey = decode($2, 'hex') AND removed_at IS NOT NULL",
                         c, member)
                       .empty();
  }
  // The client retries until it gets an answer other than `failed`.
  ingest_reply retry{write_outcome::failed, ""};
  for (int i = 0; i < 100 && retry.outcome == write_outcome::failed; ++i) {
    std::this_thread::sleep_for(100ms);
    retry = ask();
  }
  auto ok = answer_for(retry.outcome, retry.reason);

  // A post committed after that OK (stands for ingest: stored, then sent to the hub).
  auto later = make_ev(owner_sk, 9, {{"h", "priv"}}, "after the removal's OK", wall_now());
  auto stored = db::write_batch(*direct, pgtest::batch(c, {later}));
  caf::anon_send(hub, committed_events{{ingest_item{c, std::make_shared<const proto::event>(later)}}});
  std::this_thread::sleep_for(1s);  // give any revocation or publication time to happen
  auto frames = sink->all();
  std::optional<std::string> mismatch;
  {
    pqxx::nontransaction tx(*direct);
    auto r = tx.exec_params(
      "SELECT waggle_roster_mismatch(community_id, d_tag, raw) FROM events WHERE community_id = $1 "
      "AND kind = 39002 AND d_tag = 'priv' AND pubkey = decode($2, 'hex') AND deleted_at IS NULL",
      c, signer.pubkey);
    if (!r.empty() && !r[0][0].is_null())
      mismatch = r[0][0].as<std::string>();
  }

  for (auto a : {caf::actor_cast<caf::actor>(conn), caf::actor_cast<caf::actor>(group),
                 caf::actor_cast<caf::actor>(session), caf::actor_cast<caf::actor>(reader),
                 caf::actor_cast<caf::actor>(reader_session), caf::actor_cast<caf::actor>(hub),
                 caf::actor_cast<caf::actor>(ingest)})
    caf::anon_send_exit(a, caf::exit_reason::user_shutdown);

  // Preconditions of the scenario.
  ASSERT_TRUE(eose) << "member 3's subscription was not granted";
  ASSERT_TRUE(was_cut) << "the proxy did not cut the group session during COMMIT";
  ASSERT_EQ(first.outcome, write_outcome::failed) << first.reason;
  ASSERT_TRUE(removed_in_db) << "the removal did not commit";
  ASSERT_EQ(stored.at(0).outcome, write_outcome::stored);
  EXPECT_TRUE(ok.accepted) << ok.message;  // the client now holds OK true for the removal
  RecordProperty("retry_answer", ok.message);

  // The claims.
  EXPECT_TRUE(any_contains(frames, "[\"CLOSED\",\"s\",\"restricted:"))
    << "member 3's subscription was not ended after the removal was acknowledged";
  EXPECT_FALSE(any_contains(frames, later.id))
    << "member 3 (removed, OK sent) received a private-channel event published after the OK";
  EXPECT_EQ(mismatch, std::nullopt) << "the live 39002 still differs from channel_members: " << *mismatch;
}

}  // namespace
