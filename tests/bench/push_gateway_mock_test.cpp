// The mock push gateway of the push benchmark and the end-to-end tests: it is
// only as honest as what it records (every request, with its wake fields,
// headers and receipt time) and as its answers (the mode at the time of each
// request). Driven with the relay's own outbound client.

#include <gtest/gtest.h>

#include <future>

#include "bench/load/push_gateway_mock.hpp"
#include "gateway/http_client.hpp"

using namespace waggle::bench;
using waggle::gateway::http_post;
using waggle::gateway::http_result;

namespace {

std::string wake_body(const std::string& request_id, const std::string& event_id,
                      const std::string& grant = "grant-1") {
  return R"({"v":1,"request_id":")" + request_id + R"(","endpoint_grant":")" + grant +
         R"(","expires_at":1760000000,"community":"chat.example","event_id":")" + event_id +
         R"("})";
}

class MockPushGateway : public ::testing::Test {
 protected:
  http_result post(const std::string& body, const std::string& request_id,
                   std::chrono::milliseconds timeout = std::chrono::seconds(5)) {
    http_post p;
    p.url = gateway_.url();
    p.headers = {{"Authorization", "Nostr ZXZlbnQ="}, {"X-Waggle-Delivery-Id", request_id}};
    p.body = body;
    p.timeout = timeout;
    std::promise<http_result> done;
    auto got = done.get_future();
    client_->post(std::move(p), [&done](http_result r) { done.set_value(std::move(r)); });
    return got.get();
  }

  mock_push_gateway gateway_;
  std::shared_ptr<waggle::gateway::http_client> client_ = waggle::gateway::make_http_client();
};

}  // namespace

TEST(MockPushGatewayParse, ReadsV1WakesAndRefusesOthers) {
  mock_push_gateway::wake w;
  ASSERT_TRUE(parse_wake(wake_body("r-1", std::string(64, 'a')), w));
  EXPECT_EQ(w.v, 1);
  EXPECT_EQ(w.request_id, "r-1");
  EXPECT_EQ(w.endpoint_grant, "grant-1");
  EXPECT_EQ(w.expires_at, 1760000000);
  EXPECT_EQ(w.community, "chat.example");
  EXPECT_EQ(w.event_id, std::string(64, 'a'));
  EXPECT_FALSE(parse_wake("not json", w));
  EXPECT_FALSE(w.parsed);
  EXPECT_FALSE(parse_wake(R"({"v":2,"request_id":"r","endpoint_grant":"g","expires_at":1,"community":"c","event_id":"e"})", w));
  EXPECT_FALSE(parse_wake(R"({"v":1,"request_id":"r","endpoint_grant":"g","expires_at":"1","community":"c","event_id":"e"})", w));
  EXPECT_FALSE(parse_wake(R"({"v":1,"request_id":"r","endpoint_grant":"g","expires_at":1,"community":"c"})", w));
}

TEST_F(MockPushGateway, RecordsEveryRequestWithItsFieldsHeadersAndTime) {
  auto before = http_stub::now_ns();
  auto r = post(wake_body("r-1", "e1"), "r-1");
  auto after = http_stub::now_ns();
  EXPECT_EQ(r.status, 200) << r.error;
  ASSERT_EQ(gateway_.requests(), 1u);
  auto got = gateway_.wakes();
  ASSERT_EQ(got.size(), 1u);
  auto& w = got[0];
  EXPECT_TRUE(w.parsed);
  EXPECT_EQ(w.request_id, "r-1");
  EXPECT_EQ(w.event_id, "e1");
  EXPECT_EQ(w.endpoint_grant, "grant-1");
  EXPECT_EQ(w.community, "chat.example");
  EXPECT_EQ(w.method, "POST");
  EXPECT_EQ(w.target, "/wake");
  EXPECT_EQ(w.authorization, "Nostr ZXZlbnQ=");
  EXPECT_TRUE(w.has_nostr_authorization());
  EXPECT_EQ(w.delivery_id, "r-1");
  EXPECT_EQ(w.answered, 200);
  EXPECT_GE(w.at_ns, before);
  EXPECT_LE(w.at_ns, after);

  // A body that is no wake is still recorded (the benchmark counts it as foreign).
  EXPECT_EQ(post("{}", "r-2").status, 200);
  got = gateway_.wakes();
  ASSERT_EQ(got.size(), 2u);
  EXPECT_FALSE(got[1].parsed);
  EXPECT_EQ(got[1].delivery_id, "r-2");
}

TEST_F(MockPushGateway, AnswersByTheModeAtTheTimeOfEachRequest) {
  EXPECT_EQ(post(wake_body("r-1", "e1"), "r-1").status, 200);
  gateway_.set_mode(mock_push_gateway::mode::gone);
  EXPECT_EQ(post(wake_body("r-2", "e2"), "r-2").status, 410);
  gateway_.set_mode(mock_push_gateway::mode::unavailable);
  EXPECT_EQ(post(wake_body("r-3", "e3"), "r-3").status, 503);
  gateway_.set_mode(mock_push_gateway::mode::stall);
  auto stalled = post(wake_body("r-4", "e4"), "r-4", std::chrono::milliseconds(300));
  EXPECT_EQ(stalled.status, 0);
  EXPECT_EQ(stalled.error, "timeout");
  gateway_.set_mode(mock_push_gateway::mode::ok);
  EXPECT_EQ(post(wake_body("r-4", "e4"), "r-4").status, 200);  // the retry, same request_id

  auto got = gateway_.wakes();
  ASSERT_EQ(got.size(), 5u);  // the stalled request was read and recorded
  std::vector<int> answered;
  std::vector<std::string> ids;
  for (auto& w : got) {
    answered.push_back(w.answered);
    ids.push_back(w.request_id);
  }
  EXPECT_EQ(answered, (std::vector<int>{200, 410, 503, http_stub::stall, 200}));
  EXPECT_EQ(ids, (std::vector<std::string>{"r-1", "r-2", "r-3", "r-4", "r-4"}));
}

TEST_F(MockPushGateway, WaitForReturnsOnceEnoughArrivedOrAtTheDeadline) {
  EXPECT_EQ(gateway_.wait_for(1, std::chrono::milliseconds(50)), 0u);
  std::thread poster([&] { post(wake_body("r-1", "e1"), "r-1"); });
  EXPECT_EQ(gateway_.wait_for(1, std::chrono::seconds(5)), 1u);
  poster.join();
}

TEST(MockPushGatewayStop, StopEndsHeldRequestsAndIsIdempotent) {
  mock_push_gateway g{0, mock_push_gateway::mode::stall};
  auto client = waggle::gateway::make_http_client();
  http_post p;
  p.url = g.url();
  p.body = wake_body("r-1", "e1");
  p.timeout = std::chrono::seconds(5);
  std::promise<http_result> done;
  auto got = done.get_future();
  client->post(std::move(p), [&done](http_result r) { done.set_value(std::move(r)); });
  ASSERT_EQ(g.wait_for(1, std::chrono::seconds(5)), 1u);
  auto t0 = std::chrono::steady_clock::now();
  g.stop();
  g.stop();
  auto r = got.get();  // the held socket was closed: no answer, long before the 5 s timeout
  EXPECT_EQ(r.status, 0);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(4));
}
