// Issue 13, findings 2 and 7, through real sockets: the addresses of one
// IPv6 /64 share one per-address cap; at the unauthenticated cap a newcomer
// that AUTHs promptly still gets in (the oldest unauthenticated socket makes
// room); and connections answered 429/503, or served from the health
// reserve, give their TCP slot back as soon as the answer is written.

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "tests/e2e/connection_abuse_fixture.hpp"

namespace waggle::e2e {
namespace {

// A plain TCP client that sends one request, reads until the server ends
// its side, and then keeps its own side open (as a careless or hostile
// client would) until destroyed.
class held_socket {
 public:
  explicit held_socket(uint16_t port) : fd_(::socket(AF_INET, SOCK_STREAM, 0)) {
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(port);
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    connected_ = fd_ >= 0 && ::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
    timeval tv{5, 0};
    ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  }
  ~held_socket() {
    if (fd_ >= 0)
      ::close(fd_);
  }
  held_socket(const held_socket&) = delete;
  held_socket& operator=(const held_socket&) = delete;

  bool connected() const { return connected_; }
  // What the server sent before its FIN ("" if it closed without a word, or
  // did not close within 5 s).
  std::string ask(const std::string& request) {
    if (!connected_ || ::send(fd_, request.data(), request.size(), MSG_NOSIGNAL) < 0)
      return {};
    std::string got;
    char buf[4096];
    for (;;) {
      auto n = ::recv(fd_, buf, sizeof buf, 0);
      if (n == 0)
        return got;
      if (n < 0)
        return {};  // timeout or reset
      got.append(buf, static_cast<size_t>(n));
    }
  }

 private:
  int fd_;
  bool connected_ = false;
};

std::string get(const std::string& path, const std::string& extra = {}) {
  return "GET " + path + " HTTP/1.1\r\nHost: alpha.test\r\n" + extra + "Connection: close\r\n\r\n";
}

unsigned status_of(const std::string& answer) {
  return answer.rfind("HTTP/1.1 ", 0) == 0 ? std::stoul(answer.substr(9, 3)) : 0;
}

// Finding 2: the per-address limits keyed the whole IPv6 address, and one
// subscriber's /64 holds 2^64 of them. Twenty sockets from twenty addresses
// of one /64 fill its cap; another /64 still gets in.
TEST_F(connection_abuse, addresses_of_one_ipv6_64_share_one_per_address_cap) {
  gateway::server_limits limits;
  limits.max_connections_per_ip = 20;
  limits.new_connections_per_second = 0;
  limits.trusted_proxies = {"127.0.0.1"};
  auto port = start(limits);
  std::vector<std::unique_ptr<gateway::ws_client>> flood;
  for (int i = 1; i <= 20; ++i) {
    flood.push_back(open(port, "", {{"X-Forwarded-For", "2001:db8:1:2::" + std::to_string(i)}}));
    ASSERT_TRUE(flood.back()->is_open()) << i << ": " << flood.back()->error();
  }
  gateway::ws_client extra;
  extra.set_headers({{"X-Forwarded-For", "2001:db8:1:2:ffff:ffff:ffff:1"}});
  EXPECT_FALSE(extra.connect("127.0.0.1", port, host));
  EXPECT_EQ(extra.rejected_status(), 429u) << extra.error();
  auto other = open(port, alice, {{"X-Forwarded-For", "2001:db8:1:3::1"}});
  EXPECT_TRUE(other->is_open()) << other->error();
  EXPECT_GE(metric(port, "waggle_refusals_total{reason=\"connections_per_ip\"}"), 1);
}

// Finding 2: with the unauthenticated cap full (a flood from many
// addresses), every newcomer got 503 until the flood's AUTH deadline, and a
// flood renewed faster than that locked everyone out. Now a newcomer evicts
// the oldest unauthenticated socket once that one is unauth_evict_age old.
TEST_F(connection_abuse, a_newcomer_that_auths_promptly_gets_in_while_the_unauthenticated_cap_is_full) {
  gateway::server_limits limits;
  limits.max_connections_per_ip = 0;
  limits.new_connections_per_second = 0;
  limits.trusted_proxies = {"127.0.0.1"};
  limits.max_unauthenticated = 3;
  limits.auth_deadline = 60s;  // the deadline must not be what clears the flood
  limits.unauth_evict_age = 1000ms;
  auto port = start(limits);
  std::vector<std::unique_ptr<gateway::ws_client>> flood;
  for (int i = 1; i <= 3; ++i) {
    flood.push_back(open(port, "", {{"X-Forwarded-For", "198.51.100." + std::to_string(i)}}));
    ASSERT_TRUE(flood.back()->is_open()) << i << ": " << flood.back()->error();
  }
  // All younger than the eviction age: a newcomer has nobody to displace.
  gateway::ws_client early;
  early.set_headers({{"X-Forwarded-For", "198.51.100.50"}});
  EXPECT_FALSE(early.connect("127.0.0.1", port, host));
  EXPECT_EQ(early.rejected_status(), 503u) << early.error();
  std::this_thread::sleep_for(1200ms);
  auto newcomer = open(port, alice, {{"X-Forwarded-For", "198.51.100.99"}});
  ASSERT_TRUE(newcomer->is_open()) << newcomer->error();
  auto ids = history(*newcomer, "s", R"({"kinds":[1],"limit":1})");
  EXPECT_TRUE(ids.empty() || ids.back().rfind("CLOSED", 0) != 0);
  // The oldest of the flood made room, with a NOTICE and close 1008.
  std::string notice;
  while (auto f = flood[0]->read_text(5s))
    if (f->find("auth-required:") != std::string::npos)
      notice = *f;
  EXPECT_FALSE(flood[0]->is_open());
  EXPECT_EQ(flood[0]->close_code(), 1008);
  EXPECT_NE(notice.find("NOTICE"), std::string::npos) << notice;
  EXPECT_TRUE(flood[1]->is_open());
  EXPECT_TRUE(flood[2]->is_open());
  EXPECT_GE(metric(port, "waggle_refusals_total{reason=\"unauthenticated_evicted\"}"), 1);
  EXPECT_EQ(metric(port, "waggle_unauthenticated_connections"), 2);
}

// Finding 7: a connection answered 429 or 503 kept its TCP slot through the
// lingering close (2 s more when the client did not close), so a stream of
// refused requests that stayed open filled the TCP cap and the health
// reserve, and refused everyone else in turn. 80 of them (TCP cap 75 here)
// are answered and stay open; a newcomer must get in at once.
TEST_F(connection_abuse, refused_connections_give_their_tcp_slot_back_at_once) {
  gateway::server_limits limits;
  limits.max_connections = 10;  // max_tcp = 10 + 1 + 64 = 75
  limits.max_connections_per_ip = 0;
  limits.new_connections_per_second = 0.001;
  limits.new_connections_burst = 1;
  limits.trusted_proxies = {"127.0.0.1"};
  auto port = start(limits);
  std::vector<std::unique_ptr<held_socket>> refused;
  for (int i = 0; i < 80; ++i) {
    refused.push_back(std::make_unique<held_socket>(port));
    auto answer = refused.back()->ask(get("/", "X-Forwarded-For: 203.0.113.7\r\n"));
    auto status = status_of(answer);
    // The first takes the address's only token; the rest are refused.
    ASSERT_TRUE(i == 0 ? status == 200 : status == 429 || status == 503)
      << i << ": " << answer.substr(0, 200);
  }
  const auto t0 = std::chrono::steady_clock::now();
  bool in = within(10s, [&] {
    gateway::ws_client c;
    c.set_headers({{"X-Forwarded-For", "203.0.113.8"}});
    return c.connect("127.0.0.1", port, host);
  });
  const auto took = std::chrono::steady_clock::now() - t0;
  std::cerr << "a newcomer got in "
            << std::chrono::duration_cast<std::chrono::milliseconds>(took).count()
            << " ms after 80 refused connections were answered\n";
  EXPECT_TRUE(in);
  EXPECT_LT(took, 300ms);
}

// Finding 7, the health reserve: each of its sessions held its slot through
// the lingering close too, so 16 probes that did not close emptied it. With
// the TCP cap held by idle sockets, 40 probes in a row are all answered.
TEST_F(connection_abuse, health_reserve_sessions_give_their_slot_back_at_once) {
  gateway::server_limits limits;
  limits.max_connections = 10;  // max_tcp = 75, then 16 in the reserve
  limits.max_connections_per_ip = 0;
  limits.new_connections_per_second = 0;
  auto port = start(limits);
  std::vector<std::unique_ptr<held_socket>> idle;
  for (int i = 0; i < 75; ++i) {
    idle.push_back(std::make_unique<held_socket>(port));
    ASSERT_TRUE(idle.back()->connected());
  }
  ASSERT_TRUE(within(5s, [&] { return metric(port, "waggle_tcp_connections") >= 75; }));
  std::vector<std::unique_ptr<held_socket>> probes;
  for (int i = 0; i < 40; ++i) {
    probes.push_back(std::make_unique<held_socket>(port));
    auto answer = probes.back()->ask(get("/healthz"));
    EXPECT_EQ(status_of(answer), 200u) << "probe " << i << ": " << answer.substr(0, 200);
  }
}

}  // namespace
}  // namespace waggle::e2e
