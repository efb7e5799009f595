// Issue 13, findings 1 and 5, through real sockets: one address cannot take
// every connection, sockets that never authenticate do not stay, the health
// endpoints answer when TCP is saturated, and clients that never read are
// dropped while the node-wide outbound budget holds. Each test runs its own
// gateway (with limits scaled down) on the suite's node.

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>

#include "tests/e2e/connection_abuse_fixture.hpp"

namespace waggle::e2e {
namespace {

namespace net = boost::asio;

// Finding 1: one address opened 10,000 upgrades and everyone got 503. Scaled
// down: a cap of 20 per address, addresses simulated by X-Forwarded-For from
// a trusted proxy (127.0.0.1).
TEST_F(connection_abuse, per_address_cap_refuses_with_429_while_other_addresses_connect) {
  gateway::server_limits limits;
  limits.max_connections_per_ip = 20;
  limits.new_connections_per_second = 0;
  limits.trusted_proxies = {"127.0.0.1"};
  auto port = start(limits);
  const gateway::header_list attacker{{"X-Forwarded-For", "203.0.113.7"}};
  std::vector<std::unique_ptr<gateway::ws_client>> flood;
  for (int i = 0; i < 20; ++i) {
    flood.push_back(open(port, "", attacker));
    ASSERT_TRUE(flood.back()->is_open()) << i << ": " << flood.back()->error();
  }
  gateway::ws_client extra;
  extra.set_headers(attacker);
  EXPECT_FALSE(extra.connect("127.0.0.1", port, host));
  EXPECT_EQ(extra.rejected_status(), 429u) << extra.error();
  // An untrusted client's own header does not move it to another address:
  // only the right-most entry the trusted proxy appended counts.
  gateway::ws_client spoofed;
  spoofed.set_headers({{"X-Forwarded-For", "198.51.100.1, 203.0.113.7"}});
  EXPECT_FALSE(spoofed.connect("127.0.0.1", port, host));
  EXPECT_EQ(spoofed.rejected_status(), 429u);
  // Another address still gets in and authenticates.
  auto other = open(port, alice, {{"X-Forwarded-For", "203.0.113.8"}});
  ASSERT_TRUE(other->is_open()) << other->error();
  auto ids = history(*other, "s", R"({"kinds":[1],"limit":1})");
  EXPECT_TRUE(ids.empty() || ids.back().rfind("CLOSED", 0) != 0);
  EXPECT_GE(metric(port, "waggle_refusals_total{reason=\"connections_per_ip\"}"), 2);
  // Closing the flood gives the address its slots back.
  flood.clear();
  EXPECT_TRUE(within(10s, [&] {
    gateway::ws_client again;
    again.set_headers(attacker);
    return again.connect("127.0.0.1", port, host);
  }));
}

TEST_F(connection_abuse, new_connections_bucket_refuses_a_burst_with_429) {
  gateway::server_limits limits;
  limits.max_connections_per_ip = 0;
  limits.new_connections_per_second = 0.5;
  limits.new_connections_burst = 5;
  auto port = start(limits);
  std::vector<std::unique_ptr<gateway::ws_client>> opened;
  for (int i = 0; i < 5; ++i) {
    opened.push_back(std::make_unique<gateway::ws_client>());
    ASSERT_TRUE(opened.back()->connect("127.0.0.1", port, host)) << i;
  }
  gateway::ws_client sixth;
  EXPECT_FALSE(sixth.connect("127.0.0.1", port, host));
  EXPECT_EQ(sixth.rejected_status(), 429u) << sixth.error();
}

// Finding 1: sockets that answer pings but never authenticate stayed forever.
TEST_F(connection_abuse, unauthenticated_socket_is_closed_after_the_auth_deadline) {
  gateway::server_limits limits;
  limits.auth_deadline = 1s;
  limits.new_connections_per_second = 0;  // the test polls /metrics
  auto port = start(limits);
  auto authed = open(port, alice);
  auto idle = open(port, "");
  ASSERT_TRUE(idle->is_open());
  const auto t0 = std::chrono::steady_clock::now();
  std::string notice;
  while (auto f = idle->read_text(10s))
    if (f->find("auth-required:") != std::string::npos)
      notice = *f;
  const auto took = std::chrono::steady_clock::now() - t0;
  EXPECT_FALSE(idle->is_open()) << "still open after 10 s";
  EXPECT_EQ(idle->close_code(), 1008);
  EXPECT_NE(notice.find("NOTICE"), std::string::npos) << notice;
  std::cerr << "unauthenticated socket closed after "
            << std::chrono::duration_cast<std::chrono::milliseconds>(took).count() << " ms\n";
  // The authenticated one, connected just as long, is still served.
  auto ids = history(*authed, "s", R"({"kinds":[1],"limit":1})");
  EXPECT_TRUE(authed->is_open());
  EXPECT_TRUE(ids.empty() || ids.back().rfind("CLOSED", 0) != 0);
  EXPECT_GE(metric(port, "waggle_refusals_total{reason=\"auth_deadline\"}"), 1);
}

// Unauthenticated sockets have their own cap, below the total: a flood of
// them is refused while the connections that authenticated carry on.
TEST_F(connection_abuse, unauthenticated_cap_refuses_more_while_authenticated_users_carry_on) {
  gateway::server_limits limits;
  limits.max_connections_per_ip = 0;
  limits.new_connections_per_second = 0;
  limits.max_unauthenticated = 3;
  limits.auth_deadline = 3s;
  auto port = start(limits);
  auto authed = open(port, alice);
  std::vector<std::unique_ptr<gateway::ws_client>> flood;
  for (int i = 0; i < 3; ++i)
    flood.push_back(open(port, ""));
  EXPECT_EQ(metric(port, "waggle_unauthenticated_connections"), 3);
  auto ready = gateway::http_request("127.0.0.1", port, "GET", "/readyz");
  EXPECT_EQ(ready.status, 503u);
  EXPECT_NE(ready.body.find("unauthenticated connections saturated"), std::string::npos);
  gateway::ws_client fourth;
  EXPECT_FALSE(fourth.connect("127.0.0.1", port, host));
  EXPECT_EQ(fourth.rejected_status(), 503u);
  auto ids = history(*authed, "s", R"({"kinds":[1],"limit":1})");
  EXPECT_TRUE(ids.empty() || ids.back().rfind("CLOSED", 0) != 0);
  // The deadline clears the flood, and newcomers get in again.
  EXPECT_TRUE(within(10s, [&] { return metric(port, "waggle_unauthenticated_connections") == 0; }));
  auto later = open(port, bob);
  EXPECT_TRUE(later->is_open()) << later->error();
}

// Finding 1: with TCP admission saturated every new connection was closed
// right after accept, /healthz included.
TEST_F(connection_abuse, health_endpoints_answer_while_tcp_is_saturated) {
  gateway::server_limits limits;
  limits.max_connections = 10;  // max_tcp = 10 + 1 + 64 = 75
  limits.max_connections_per_ip = 0;
  limits.new_connections_per_second = 0;
  auto port = start(limits);
  net::io_context ioc;
  std::vector<net::ip::tcp::socket> idle;
  for (int i = 0; i < 75; ++i) {
    idle.emplace_back(ioc);
    idle.back().connect({net::ip::make_address("127.0.0.1"), port});
  }
  // Let the acceptor take them all before probing.
  EXPECT_TRUE(within(5s, [&] { return metric(port, "waggle_tcp_connections") >= 75; }));
  auto health = gateway::http_request("127.0.0.1", port, "GET", "/healthz", {}, {}, 5s);
  EXPECT_EQ(health.status, 200u) << health.error;
  auto ready = gateway::http_request("127.0.0.1", port, "GET", "/readyz", {}, {}, 5s);
  EXPECT_EQ(ready.status, 503u) << ready.error;
  EXPECT_NE(ready.body.find("connections saturated"), std::string::npos) << ready.body;
  // Anything else in the reserve hears why instead of an empty reply.
  gateway::ws_client ws;
  EXPECT_FALSE(ws.connect("127.0.0.1", port, host));
  EXPECT_EQ(ws.rejected_status(), 503u) << ws.error();
}

// Finding 5: clients that never read stayed connected by sending a tiny
// frame now and then.
TEST_F(connection_abuse, non_reading_client_is_dropped_after_the_write_stall) {
  gateway::server_limits limits;
  limits.write_stall = 2s;
  limits.new_connections_per_second = 0;  // the test polls /metrics
  auto port = start(limits);
  auto writer = open(port, bob);
  const std::string tag = "stall-" + std::to_string(unix_now());
  for (int i = 0; i < 30; ++i) {
    auto ev = signed_event(bob, 1, std::string(50000, 'a' + i % 26), {{"t", tag}});
    ASSERT_NE(publish(*writer, ev).find(",true,"), std::string::npos);
  }
  auto before = srv_->websocket_count();
  auto sleeper = open(port, alice);
  ASSERT_EQ(srv_->websocket_count(), before + 1);
  // Four histories of 1.5 MB each, never read; a frame every 300 ms.
  for (int s = 0; s < 4; ++s)
    sleeper->send_text(R"(["REQ","h)" + std::to_string(s) + R"(",{"#t":[")" + tag + R"("]}])");
  const auto t0 = std::chrono::steady_clock::now();
  bool dropped = within(15s, [&] {
    sleeper->send_text(R"(["CLOSE","nothing"])", 1s);
    std::this_thread::sleep_for(280ms);
    return srv_->websocket_count() == before;
  });
  const auto took = std::chrono::steady_clock::now() - t0;
  EXPECT_TRUE(dropped) << "the non-reading client is still connected after 15 s";
  std::cerr << "non-reading client dropped after "
            << std::chrono::duration_cast<std::chrono::milliseconds>(took).count() << " ms\n";
  EXPECT_GE(metric(port, "waggle_refusals_total{reason=\"write_stall\"}"), 1);
  EXPECT_TRUE(within(5s, [&] { return metric(port, "waggle_outbound_bytes") == 0; }));
}

// Finding 5: no node-wide cap on outbound bytes. Two non-readers queue 6 MB
// each against a 2 MiB budget: the budget drops them and holds.
TEST_F(connection_abuse, node_wide_outbound_budget_drops_the_biggest_queues_and_holds) {
  gateway::server_limits limits;
  limits.write_stall = 0s;
  limits.new_connections_per_second = 0;  // the test polls /metrics
  limits.max_outbound_bytes_total = 2u << 20;
  auto port = start(limits);
  auto writer = open(port, bob);
  const std::string tag = "budget-" + std::to_string(unix_now());
  for (int i = 0; i < 30; ++i) {
    auto ev = signed_event(bob, 1, std::string(50000, 'a' + i % 26), {{"t", tag}});
    ASSERT_NE(publish(*writer, ev).find(",true,"), std::string::npos);
  }
  auto before = srv_->websocket_count();
  std::vector<std::unique_ptr<gateway::ws_client>> sleepers;
  for (int n = 0; n < 2; ++n) {
    sleepers.push_back(open(port, alice));
    for (int s = 0; s < 4; ++s)
      sleepers.back()->send_text(R"(["REQ","h)" + std::to_string(s) + R"(",{"#t":[")" + tag
                                 + R"("]}])");
  }
  double peak = 0;
  bool dropped = within(15s, [&] {
    peak = std::max(peak, metric(port, "waggle_outbound_bytes"));
    return srv_->websocket_count() == before;
  });
  EXPECT_TRUE(dropped) << "non-reading clients still connected after 15 s";
  std::cerr << "outbound gauge peak " << peak << " bytes (budget " << (2u << 20) << ")\n";
  EXPECT_GE(peak, 0) << "no waggle_outbound_bytes gauge";
  // One frame (50 KB) per session may pass the budget before it is shed.
  EXPECT_LE(peak, double(2u << 20) + 2 * 64 * 1024);
  EXPECT_GE(metric(port, "waggle_refusals_total{reason=\"outbound_budget\"}"), 1);
  // The well-behaved writer was never dropped.
  EXPECT_TRUE(writer->is_open());
  auto ids = history(*writer, "w", R"({"#t":[")" + tag + R"("],"limit":1})");
  ASSERT_FALSE(ids.empty());
  EXPECT_EQ(ids.back().rfind("CLOSED", 0), std::string::npos);
}

}  // namespace
}  // namespace waggle::e2e
