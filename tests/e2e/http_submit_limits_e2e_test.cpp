// POST /events in flight are bounded on the node and per community
// (--max-http-submits, --max-http-submits-per-community): each one is an
// actor until it is answered, and none needs a key to be made. Red check:
// without the bound, the fourth POST below waited with the others and was
// accepted, never a 503.

#include <future>
#include <vector>

#include "tests/e2e/node_fixture.hpp"

namespace waggle::e2e {
namespace {

class http_submit_limits_e2e : public node_e2e {
 protected:
  static void SetUpTestSuite() {
    configure_ = [](node_config& cfg, gateway::server_limits&) {
      cfg.max_http_submits = 4;
      cfg.max_http_submits_per_community = 3;
    };
    node_e2e::SetUpTestSuite();
  }
  static void TearDownTestSuite() {
    node_e2e::TearDownTestSuite();
    configure_ = nullptr;
  }
};

TEST_F(http_submit_limits_e2e, posts_beyond_the_community_and_node_caps_are_503_at_once) {
  // Inserts wait on this lock, so the POSTs stay in flight until it goes.
  auto holder = db_->connect();
  pqxx::work lock(*holder);
  lock.exec("LOCK TABLE events IN SHARE MODE");
  auto in_flight_on_the_node = [&](size_t n) {
    return pgtest::eventually([&] {
      auto m = node_->api().watch->metrics_text();
      return m.find("waggle_http_submits_in_flight " + std::to_string(n) + "\n") != std::string::npos;
    });
  };
  std::vector<std::future<gateway::http_response>> held;
  for (int i = 0; i < 3; ++i) {
    auto ev = signed_event(bob, 1, "held " + std::to_string(i));
    held.push_back(std::async(std::launch::async, [this, ev] { return post_event("alpha.test", bob, ev); }));
  }
  ASSERT_TRUE(in_flight_on_the_node(3));
  // Answered at once; without the cap it would wait on the lock with the others.
  auto fourth_ev = signed_event(bob, 1, "fourth");
  auto fourth = std::async(std::launch::async,
                           [this, fourth_ev] { return post_event("alpha.test", bob, fourth_ev); });
  if (fourth.wait_for(std::chrono::seconds(5)) != std::future_status::ready) {
    lock.abort();
    FAIL() << "the fourth POST was not answered at once";
  }
  auto refused = fourth.get();
  EXPECT_EQ(refused.status, 503u) << refused.body;
  EXPECT_NE(refused.body.find("rate-limited:"), std::string::npos) << refused.body;
  // Another community has its own turn, up to the node's cap.
  auto other_ev = signed_event(bob, 1, "beta held");
  held.push_back(std::async(std::launch::async, [this, other_ev] { return post_event("beta.test", bob, other_ev); }));
  ASSERT_TRUE(in_flight_on_the_node(4));
  auto over_node = post_event("beta.test", bob, signed_event(bob, 1, "beta second"));
  EXPECT_EQ(over_node.status, 503u) << over_node.body;
  lock.abort();
  for (auto& f : held) {
    auto r = f.get();
    EXPECT_EQ(r.status, 200u) << r.body;
    EXPECT_NE(r.body.find("\"accepted\":true"), std::string::npos) << r.body;
  }
  ASSERT_TRUE(in_flight_on_the_node(0));
  auto after = post_event("alpha.test", bob, signed_event(bob, 1, "after"));
  EXPECT_EQ(after.status, 200u) << after.body;
}

// A captured Authorization header used to pass again within the auth window
// (NIP-98 tokens were replayable: the same event answered as a duplicate,
// OK true). The node now remembers each token's signature until it expires.
TEST_F(http_submit_limits_e2e, a_nip98_token_is_good_once) {
  auto ev = signed_event(bob, 1, "once");
  std::string url = "http://alpha.test/events";
  auto auth = signed_event(bob, 27235, "",
                           {{"u", url}, {"method", "POST"}, {"payload", proto::sha256_hex(ev.raw)}});
  auto send = [&] {
    return gateway::http_request("127.0.0.1", port_, "POST", "/events",
                                 {{"Host", "alpha.test"}, {"Authorization", "Nostr " + base64(auth.raw)}},
                                 ev.raw);
  };
  auto first = send();
  EXPECT_EQ(first.status, 200u) << first.body;
  EXPECT_NE(first.body.find("\"accepted\":true"), std::string::npos) << first.body;
  auto again = send();
  EXPECT_EQ(again.status, 401u) << again.body;
  EXPECT_NE(again.body.find("already used"), std::string::npos) << again.body;
  // The same request signed afresh passes (a duplicate event, as ever).
  auto fresh = post_event("alpha.test", bob, ev);
  EXPECT_EQ(fresh.status, 200u) << fresh.body;
}

}  // namespace
}  // namespace waggle::e2e
