// Cluster-wide control (docs/scaling.md): what one node decides reaches
// every node.
// - Roster publications: a channel changed through all three nodes has its
//   roster published by one owner node, which coalesces the changes; with
//   the routing off every node that changed it publishes (the contrast is a
//   test too, so the first cannot pass by accident).
// - Blocked addresses: an address blocked in a community (as psql or NIP-86
//   on any node would) closes that community's open connections from it on
//   every node; another community's connections from it stay.

#include <cstdio>
#include <map>
#include <thread>

#include <pqxx/transaction>

#include "tests/e2e/cluster_fixture.hpp"

namespace waggle::e2e {
namespace {

class ClusterRosterE2E : public ClusterE2E {
 protected:
  uint64_t published(int i) {
    auto m = gateway::http_request("127.0.0.1", nodes_[i].port, "GET", "/metrics",
                                   {{"Host", "alpha.test"}}, {}, 5s);
    auto at = m.body.find("\nwaggle_rosters_published_total ");
    if (m.status != 200 || at == std::string::npos)
      return ~uint64_t{0};
    auto line = m.body.substr(at + 1, m.body.find('\n', at + 1) - at - 1);
    return std::stoull(line.substr(line.rfind(' ') + 1));
  }

  // Thirty members added to one channel, through the three nodes in turn;
  // returns each node's publications once the counts stopped moving.
  std::vector<uint64_t> change_one_channel_through_every_node() {
    const std::string alice = pgtest::secret(11);
    wait_until_linked();
    // Every relay has read the registry since all three registered (once a second).
    std::this_thread::sleep_for(1500ms);
    std::vector<uint64_t> before;
    for (int i = 0; i < nodes; ++i)
      before.push_back(published(i));
    std::vector<std::unique_ptr<gateway::ws_client>> admin;
    for (int i = 0; i < nodes; ++i)
      admin.push_back(login(i, alice));
    auto ok = command_ok(*admin[0], signed_event(alice, 9007, "", {{"h", "ops"}}));
    EXPECT_NE(ok.find(",true,"), std::string::npos) << ok;
    for (int m = 0; m < 30; ++m) {
      auto add = signed_event(alice, 9000, "",
                              {{"h", "ops"}, {"p", proto::pubkey_of(pgtest::secret(200 + m)),
                                              "member"}});
      auto r = command_ok(*admin[m % nodes], add);
      EXPECT_NE(r.find(",true,"), std::string::npos) << r;
    }
    std::vector<uint64_t> after(nodes, 0), last(nodes, 1);
    for (int t = 0; t < 40 && after != last; ++t) {
      last = after;
      std::this_thread::sleep_for(250ms);
      for (int i = 0; i < nodes; ++i)
        after[i] = published(i) - before[i];
    }
    // The live roster lists every member, whoever published it.
    auto conn = db_->connect();
    pqxx::read_transaction tx(*conn);
    auto listed = tx.exec1(
      "SELECT count(*) FROM events e, jsonb_array_elements(e.raw::jsonb -> 'tags') t"
      " WHERE e.kind = 39002 AND e.d_tag = 'ops' AND e.deleted_at IS NULL AND t->>0 = 'p'");
    EXPECT_EQ(listed[0].as<int>(), 31) << "alice and thirty members";
    std::printf("[ rosters  ] publications per node: %llu %llu %llu\n",
                static_cast<unsigned long long>(after[0]),
                static_cast<unsigned long long>(after[1]),
                static_cast<unsigned long long>(after[2]));
    return after;
  }
};

TEST_P(ClusterRosterE2E, AChannelsRosterIsPublishedByOneOwnerNode) {
  auto counts = change_one_channel_through_every_node();
  int publishers = 0;
  uint64_t total = 0;
  for (auto c : counts) {
    publishers += c > 0;
    total += c;
  }
  EXPECT_EQ(publishers, 1) << "counts: " << counts[0] << " " << counts[1] << " " << counts[2];
  EXPECT_GT(total, 0u);
}

class ClusterRosterUnroutedE2E : public ClusterRosterE2E {
 protected:
  ClusterRosterUnroutedE2E() {
    configure_ = [](int, node_config& cfg) { cfg.roster_routing = false; };
  }
};

TEST_P(ClusterRosterUnroutedE2E, WithoutRoutingEveryNodeThatChangedItPublishes) {
  auto counts = change_one_channel_through_every_node();
  int publishers = 0;
  for (auto c : counts)
    publishers += c > 0;
  EXPECT_EQ(publishers, nodes) << "counts: " << counts[0] << " " << counts[1] << " " << counts[2];
}

// The block travels through the database (its NOTIFY wakes every node's
// directory; a 2 s refresh backs it), not the bus: one driver is enough.
using ClusterBlockE2E = ClusterE2E;

TEST_P(ClusterBlockE2E, ABlockedAddressIsClosedOnEveryNodeAndOnlyInItsCommunity) {
  {
    auto conn = db_->connect();
    ASSERT_TRUE(
      db::add_community(*conn, "beta.test", "Beta", community_policy::open).has_value());
  }
  // The directories serve beta within their refresh.
  std::this_thread::sleep_for(2500ms);
  std::vector<std::unique_ptr<gateway::ws_client>> alphas, betas;
  for (int i = 0; i < nodes; ++i) {
    alphas.push_back(login(i, pgtest::secret(12)));
    subscribe(*alphas.back(), R"({"kinds":[1]})");
    auto b = std::make_unique<gateway::ws_client>();
    ASSERT_TRUE(b->connect("127.0.0.1", nodes_[i].port, "beta.test")) << b->error();
    ASSERT_TRUE(b->read_text(5s).has_value()) << "beta's AUTH challenge";
    betas.push_back(std::move(b));
  }
  {
    auto conn = db_->connect();
    pqxx::work tx(*conn);
    tx.exec("INSERT INTO community_blocked_ips (community_id, ip, reason)"
            " SELECT id, '127.0.0.1', 'test' FROM communities WHERE host = 'alpha.test'");
    tx.commit();
  }
  for (int i = 0; i < nodes; ++i) {
    bool told = false;
    auto deadline = std::chrono::steady_clock::now() + 5s;
    while (alphas[i]->is_open() && std::chrono::steady_clock::now() < deadline)
      if (auto f = alphas[i]->read_text(250ms); f && f->find("blocked:") != std::string::npos)
        told = true;
    EXPECT_FALSE(alphas[i]->is_open()) << "node " << i << " kept the blocked address's socket";
    EXPECT_TRUE(told) << "node " << i << " closed without saying why";
  }
  for (int i = 0; i < nodes; ++i) {
    betas[i]->send_text(R"(["REQ","b",{"kinds":[1]}])");
    auto f = betas[i]->read_text(5s);
    EXPECT_TRUE(f.has_value()) << "node " << i << " closed beta's connection too";
  }
}

INSTANTIATE_TEST_SUITE_P(Drivers, ClusterRosterE2E, ::testing::Values("postgres", "caf", "nats"),
                         [](const auto& info) { return info.param; });
INSTANTIATE_TEST_SUITE_P(Drivers, ClusterBlockE2E, ::testing::Values("postgres"),
                         [](const auto& info) { return info.param; });
INSTANTIATE_TEST_SUITE_P(Drivers, ClusterRosterUnroutedE2E, ::testing::Values("postgres"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace waggle::e2e
