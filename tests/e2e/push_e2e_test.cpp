// Push end to end (docs/push.md): a lease and a message over WebSocket, the
// wake POSTed to a real HTTP gateway signed by the relay, exactly once, with
// no message content; retries with the same request id; a 410 that disables
// the lease; lease refusals as protocol outcomes.

#include <pqxx/pqxx>

#include "messages/proto/nip98.hpp"
#include "tests/e2e/listener_server.hpp"
#include "tests/e2e/node_fixture.hpp"

namespace waggle::e2e {
namespace {

proto::event lease(const std::string& sk, const std::string& installation,
                   const std::string& endpoint, int generation) {
  return signed_event(sk, 30350, "",
                      {{"d", installation},
                       {"endpoint", endpoint},
                       {"app", "waggle-ios"},
                       {"expiration", std::to_string(unix_now() + 3600)},
                       {"generation", std::to_string(generation)}});
}

class PushE2E : public node_e2e {
 protected:
  static void SetUpTestSuite() {
    gateway_ = new listener_server();
    configure_ = [](node_config& cfg, gateway::server_limits&) {
      cfg.push_gateway_url = gateway_->url("/push");
      cfg.delivery_timeout_ms = 1000;
    };
    node_e2e::SetUpTestSuite();
  }
  static void TearDownTestSuite() {
    node_e2e::TearDownTestSuite();
    delete gateway_;
    gateway_ = nullptr;
    configure_ = {};
  }
  int64_t count(const std::string& sql) {
    auto conn = db_->connect();
    pqxx::nontransaction tx(*conn);
    return tx.exec(sql)[0][0].as<int64_t>();
  }
  bool eventually(const std::function<bool()>& done, std::chrono::milliseconds within = 10s) {
    auto until = std::chrono::steady_clock::now() + within;
    while (!done()) {
      if (std::chrono::steady_clock::now() > until)
        return false;
      std::this_thread::sleep_for(20ms);
    }
    return true;
  }
  static inline listener_server* gateway_ = nullptr;
};

TEST_F(PushE2E, AMessageWakesTheLeaseHolderOnceWithoutItsContent) {
  auto holder = login("alpha.test", bob);
  auto ok = publish(*holder, lease(bob, "phone-a", "grant-a", 1));
  ASSERT_NE(ok.find(",true,"), std::string::npos) << ok;
  auto sender = login("alpha.test", alice);
  auto before = gateway_->count("/push");
  auto msg = signed_event(alice, 9, "the secret plans");
  ok = publish(*sender, msg);
  ASSERT_NE(ok.find(",true,"), std::string::npos) << ok;
  auto got = gateway_->wait_for("/push", before + 1);
  ASSERT_EQ(got.size(), before + 1);
  auto r = got.back();
  auto body = parse(r.body);
  ASSERT_TRUE(body.IsObject()) << r.body;
  EXPECT_EQ(body["v"].GetInt(), 1);
  EXPECT_EQ(std::string(body["endpoint_grant"].GetString()), "grant-a");
  EXPECT_EQ(std::string(body["community"].GetString()), "alpha.test");
  EXPECT_EQ(std::string(body["event_id"].GetString()), msg.id);
  EXPECT_EQ(std::string(body["request_id"].GetString()), r.headers["X-Waggle-Delivery-Id"]);
  EXPECT_EQ(r.body.find("secret"), std::string::npos) << "the wake carries no content";
  auto auth = proto::verify_nip98(r.headers["Authorization"], "POST",
                                  "127.0.0.1:" + std::to_string(gateway_->port()), "/push", r.body,
                                  unix_now(), 60, true);
  ASSERT_TRUE(auth.ok) << auth.err.message();
  EXPECT_EQ(auth.pubkey, node_->relay_pubkey());
  // The holder's own message wakes nobody; nothing is sent twice.
  publish(*holder, signed_event(bob, 9, "my own"));
  EXPECT_TRUE(eventually([&] {
    return count("SELECT count(*) FROM push_wake_outbox WHERE state = 'delivered'") >= 1 &&
           count("SELECT count(*) FROM push_match_queue") == 0;
  }));
  std::this_thread::sleep_for(300ms);  // a second POST would have come by now
  EXPECT_EQ(gateway_->count("/push"), before + 1);
}

TEST_F(PushE2E, ARetryReusesTheRequestIdAndAGoneEndpointIsDisabled) {
  auto holder = login("beta.test", bob);
  ASSERT_NE(publish(*holder, lease(bob, "phone-b", "grant-b", 1)).find(",true,"),
            std::string::npos);
  auto sender = login("beta.test", alice);
  gateway_->answer("/push", 503);
  auto before = gateway_->count("/push");
  publish(*sender, signed_event(alice, 9, "retry me"));
  auto first = gateway_->wait_for("/push", before + 1);
  ASSERT_EQ(first.size(), before + 1);
  gateway_->answer("/push", 200);
  auto second = gateway_->wait_for("/push", before + 2, 10s);
  ASSERT_EQ(second.size(), before + 2);
  EXPECT_EQ(second.back().headers["X-Waggle-Delivery-Id"], first.back().headers["X-Waggle-Delivery-Id"]);

  gateway_->answer("/push", 410);
  publish(*sender, signed_event(alice, 9, "to a gone phone"));
  ASSERT_EQ(gateway_->wait_for("/push", before + 3).size(), before + 3);
  EXPECT_TRUE(eventually([&] {
    return count("SELECT count(*) FROM push_leases WHERE installation_id = 'phone-b' "
                 "AND NOT endpoint_enabled") == 1;
  }));
  gateway_->answer("/push", 200);
  publish(*sender, signed_event(alice, 9, "nobody to wake"));
  std::this_thread::sleep_for(500ms);
  EXPECT_EQ(gateway_->count("/push"), before + 3);
}

TEST_F(PushE2E, LeaseRefusalsAreProtocolOutcomes) {
  auto c = login("alpha.test", alice);
  auto bad = signed_event(alice, 30350, "", {{"d", "x"}, {"endpoint", "g"}, {"app", "a"}});
  auto ok = publish(*c, bad);
  EXPECT_NE(ok.find(",false,\"invalid: push lease"), std::string::npos) << ok;
  ASSERT_NE(publish(*c, lease(alice, "p1", "grant-z", 2)).find(",true,"), std::string::npos);
  // A newer event (a later second) at the same address, generation not rising.
  std::this_thread::sleep_for(1100ms);
  ok = publish(*c, lease(alice, "p1", "grant-y", 2));
  EXPECT_NE(ok.find(",false,\"invalid: push lease: generation"), std::string::npos) << ok;
  ok = publish(*login("alpha.test", bob), lease(bob, "p9", "grant-z", 1));
  EXPECT_NE(ok.find(",false,\"invalid: push lease: this endpoint"), std::string::npos) << ok;
}

}  // namespace
}  // namespace waggle::e2e
