#pragma once

// The fixture of the connection-abuse e2e tests: each test runs its own
// gateway (with limits scaled down) on the suite's node, and drives it with
// real sockets.

#include <string>
#include <vector>

#include "tests/e2e/node_fixture.hpp"

namespace waggle::e2e {

class connection_abuse : public node_e2e {
 protected:
  // A gateway on the suite's node with `limits`; stopped at the end of the test.
  uint16_t start(gateway::server_limits limits) {
    srv_ = std::make_unique<gateway::server>(node_->api(), limits, "127.0.0.1", 0, 1);
    return srv_->start();
  }
  void TearDown() override {
    if (srv_)
      srv_->shutdown(std::chrono::seconds(2));
    srv_.reset();
  }

  // Connects to alpha.test through `port` with extra upgrade headers; AUTHs
  // `sk` unless it is empty (then the challenge is left unanswered).
  std::unique_ptr<gateway::ws_client> open(uint16_t port, const std::string& sk,
                                           gateway::header_list headers = {}) {
    auto c = std::make_unique<gateway::ws_client>();
    c->set_headers(std::move(headers));
    if (!c->connect("127.0.0.1", port, host))
      return c;
    auto challenge = c->read_text(5s);
    EXPECT_TRUE(challenge.has_value());
    if (sk.empty() || !challenge)
      return c;
    auto d = parse(*challenge);
    auto auth = signed_event(sk, 22242, "",
                             {{"relay", "ws://" + host + "/"}, {"challenge", d[1].GetString()}});
    c->send_text("[\"AUTH\"," + auth.raw + "]");
    auto ok = c->read_text(5s);
    EXPECT_TRUE(ok && ok->find(",true,") != std::string::npos) << ok.value_or("(none)");
    return c;
  }

  // One gauge or counter line of the gateway's /metrics ("name value").
  double metric(uint16_t port, const std::string& name) {
    auto res = gateway::http_request("127.0.0.1", port, "GET", "/metrics", {}, {}, 5s);
    auto at = res.body.find("\n" + name + " ");
    if (at == std::string::npos)
      return -1;
    return std::stod(res.body.substr(at + name.size() + 2));
  }

  const std::string host = "alpha.test";
  std::unique_ptr<gateway::server> srv_;
};

// Polls `p` every 20 ms until it holds or `bound` has passed.
template <class Pred>
bool within(std::chrono::milliseconds bound, Pred p) {
  auto until = std::chrono::steady_clock::now() + bound;
  while (std::chrono::steady_clock::now() < until) {
    if (p())
      return true;
    std::this_thread::sleep_for(20ms);
  }
  return p();
}

}  // namespace waggle::e2e
