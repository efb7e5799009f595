// The push gate across nodes (docs/push.md, "Several nodes"): three nodes
// with the gate cache on and no backfill by age, so a wake can only come
// from the gate statement or from the ids the lease's barrier collected. A
// lease activated through node 0 while nodes 1 and 2 publish: every message
// sent after the lease's OK wakes the holder, on every node. Without the
// bus request to the other nodes (push_gate_relay) their caches never gate
// the community and none of their messages wakes anyone.

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

class ClusterPushGateE2E : public ClusterE2E {
 protected:
  ClusterPushGateE2E() {
    configure_ = [this](int, node_config& cfg) {
      cfg.push_gateway_url = gateway_.url("/push");
      cfg.push_gate_cache = true;
      cfg.push_backfill_seconds = 0;
      cfg.delivery_timeout_ms = 2000;
    };
  }
  listener_server gateway_;
};

TEST_P(ClusterPushGateE2E, ALeaseOnOneNodeGatesEveryNodesNextMessage) {
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

INSTANTIATE_TEST_SUITE_P(Drivers, ClusterPushGateE2E, ::testing::Values("postgres", "caf", "nats"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace waggle::e2e
