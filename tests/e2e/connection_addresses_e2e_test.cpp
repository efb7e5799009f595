// Issue 13, finding 2, through real sockets: the addresses of one IPv6 /64
// share one per-address cap, and at the unauthenticated cap a newcomer that
// AUTHs promptly still gets in (the oldest unauthenticated socket makes room).

#include "tests/e2e/connection_abuse_fixture.hpp"

namespace waggle::e2e {
namespace {

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

}  // namespace
}  // namespace waggle::e2e
