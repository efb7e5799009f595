// The push gate across nodes (docs/push.md, "Several nodes") in a cluster
// whose nodes do not all run the gate cache, as one moving from the old
// advice (--push-gate-cache off on every node) to "on" node by node is.
// Found by the red-team review of the push gate: a node with the cache off
// ran no push gate relay, so it wrote leases without asking the other
// nodes (their caches, loaded without the community, stored its push
// events ungated until their next reload: 0 of 266 messages woken) and
// answered no gate request (every lease through the other nodes refused).
// Now every clustered node with push runs the relay; with the cache off it
// answers at once (it gates everything) and asks before its own leases.

#include <mutex>

#include "tests/e2e/cluster_fixture.hpp"
#include "tests/e2e/listener_server.hpp"

namespace waggle::e2e {
namespace {

proto::event lease(const std::string& sk, const std::string& installation,
                   const std::string& endpoint) {
  return signed_event(sk, 30350, "",
                      {{"d", installation},
                       {"endpoint", endpoint},
                       {"app", "waggle-ios"},
                       {"expiration", std::to_string(unix_now() + 3600)},
                       {"generation", "1"}});
}

// Node 0 has the cache off (as the old docs said); nodes 1 and 2 have it on.
class ClusterMixedGateCacheE2E : public ClusterE2E {
 protected:
  ClusterMixedGateCacheE2E() {
    configure_ = [this](int i, node_config& cfg) {
      cfg.push_gateway_url = gateway_.url("/push");
      cfg.push_gate_cache = i != 0;
      cfg.push_backfill_seconds = 0;
      cfg.delivery_timeout_ms = 2000;
    };
  }
  listener_server gateway_;
};

TEST_P(ClusterMixedGateCacheE2E, ALeaseThroughACacheOnNodeIsAcceptedWhileACacheOffNodeIsLive) {
  wait_until_linked();
  const auto holder_sk = pgtest::secret(69);
  auto holder = login(1, holder_sk);
  auto ok = command_ok(*holder, lease(holder_sk, "phone-9", "grant-9"));
  EXPECT_NE(ok.find(",true,"), std::string::npos)
    << "a lease through a cache-on node is refused while a cache-off node is live: " << ok;
}

TEST_P(ClusterMixedGateCacheE2E, ALeaseThroughTheCacheOffNodeGatesTheOtherNodesNextMessage) {
  wait_until_linked();
  const auto holder_sk = pgtest::secret(70);
  struct sent {
    std::string id;
    std::chrono::steady_clock::time_point at;
    bool ok = false;
  };
  std::mutex m;
  std::vector<sent> messages;
  std::atomic<bool> stop{false};
  std::vector<std::thread> publishers;
  for (int node = 1; node < nodes; ++node)
    publishers.emplace_back([&, node] {
      auto c = login(node, pgtest::secret(71 + node));
      for (int n = 0; !stop; ++n) {
        auto ev = signed_event(pgtest::secret(71 + node), 9,
                               "node " + std::to_string(node) + " message " + std::to_string(n));
        auto at = std::chrono::steady_clock::now();
        auto ok = command_ok(*c, ev);
        std::lock_guard lk(m);
        messages.push_back({ev.id, at, ok.find(",true,") != std::string::npos});
        std::this_thread::sleep_for(5ms);
      }
    });
  std::this_thread::sleep_for(500ms);  // the other nodes store ungated meanwhile
  auto holder = login(0, holder_sk);
  auto ok = command_ok(*holder, lease(holder_sk, "phone-1", "grant-1"));
  auto leased_at = std::chrono::steady_clock::now();
  ASSERT_NE(ok.find(",true,"), std::string::npos) << ok;
  std::this_thread::sleep_for(1500ms);
  stop = true;
  for (auto& t : publishers)
    t.join();

  std::set<std::string> must_wake;
  size_t before = 0;
  for (const auto& s : messages) {
    ASSERT_TRUE(s.ok) << "a message was refused";
    if (s.at > leased_at)
      must_wake.insert(s.id);
    else
      ++before;
  }
  ASSERT_GT(must_wake.size(), 20u) << "too few messages after the lease to show anything";
  std::set<std::string> woken;
  auto deadline = std::chrono::steady_clock::now() + 20s;
  while (std::chrono::steady_clock::now() < deadline) {
    woken.clear();
    for (const auto& r : gateway_.wait_for("/push", 0, 0ms)) {
      auto body = parse(r.body);
      if (body.IsObject() && body.HasMember("event_id"))
        woken.insert(body["event_id"].GetString());
    }
    if (std::includes(woken.begin(), woken.end(), must_wake.begin(), must_wake.end()))
      break;
    std::this_thread::sleep_for(200ms);
  }
  size_t missing = 0;
  for (const auto& id : must_wake)
    missing += woken.count(id) == 0;
  EXPECT_EQ(missing, 0u) << "of " << must_wake.size()
                         << " messages sent after the lease's OK on nodes 1 and 2 (" << before
                         << " sent before it, " << woken.size() << " woken in all)";
}

INSTANTIATE_TEST_SUITE_P(Drivers, ClusterMixedGateCacheE2E, ::testing::Values("postgres", "nats"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace waggle::e2e
