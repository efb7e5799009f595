// The HTTP submit actor (actors/connection/http_submit_actor.hpp): NIP-98 on
// the actor, the answers of the outcome table, and what a trace records of a
// POST /events. A request refused before it became an event (no or a bad
// Authorization, an empty body) records nothing: a trace holds an http_out
// only after its http_in, or it could not be replayed (found by a red-team
// review: refused requests left an http_out without its input).

#include <gtest/gtest.h>

#include "actors/connection/http_submit_actor.hpp"
#include "actors/trace/trace_recorder.hpp"
#include "messages/proto/nip98.hpp"
#include "tests/actors/actor_fixture.hpp"
#include "tests/support/event_builder.hpp"

namespace waggle::testing {
namespace {

constexpr int64_t now = 1'700'000'000;
const std::string alice_sk = test::secret(1);

// A node-level trace port that keeps the kinds it is asked to record.
struct kinds_port final : trace_port {
  std::vector<std::string> kinds;
  int64_t unix_now(const std::string&, const std::function<int64_t()>& source) override {
    return source();
  }
  std::string random_challenge(const std::string&,
                               const std::function<std::string()>& source) override {
    return source();
  }
  steady_time steady_now(const std::string&, const std::function<steady_time()>& source) override {
    return source();
  }
  bool node_level() const override { return true; }
  bool wants_connection(const std::string&) const override { return true; }
  void record(const std::string&, std::string_view kind, const trace_fields&) override {
    kinds.emplace_back(kind);
  }
  void spawned(const std::string&, const caf::actor&) override {}
  std::string name_of(const caf::actor_addr&) const override { return {}; }
};

class HttpSubmitTest : public actor_test {
 protected:
  std::shared_ptr<kinds_port> port = std::make_shared<kinds_port>();
  std::vector<gateway::http_event_reply> replies;

  void submit(std::string authorization, std::string body) {
    http_submit_context ctx;
    ctx.settings.community_id = 1;
    ctx.env = test_env(now).for_actor("http-1");
    ctx.env.trace = port;
    ctx.done = [this](gateway::http_event_reply r) { replies.push_back(std::move(r)); };
    auto worker = spawn(http_submit_actor_impl, std::move(ctx));
    caf::anon_send(worker, http_request_in{std::move(authorization), "relay.test", "/events",
                                           std::move(body)});
    run();
  }
  std::string nip98(std::vector<proto::tag> tags) {
    auto auth = test::event_builder{alice_sk}.kind(27235).at(now).tags(std::move(tags)).sign();
    return "Nostr " + proto::base64_encode(auth.raw);
  }
};

TEST_F(HttpSubmitTest, AMissingAuthorizationIsA401AndRecordsNothing) {
  submit("", test::event_builder{alice_sk}.at(now).sign().raw);
  ASSERT_EQ(replies.size(), 1u);
  EXPECT_EQ(replies[0].http_status, 401);
  EXPECT_FALSE(replies[0].accepted);
  EXPECT_EQ(replies[0].message.rfind("auth-required: missing Authorization header", 0), 0u)
    << replies[0].message;
  EXPECT_TRUE(port->kinds.empty());
}

TEST_F(HttpSubmitTest, ABadSignatureOnTheAuthorizationIsA401AndRecordsNothing) {
  auto body = test::event_builder{alice_sk}.at(now).sign().raw;
  auto header = nip98({{"u", "http://relay.test/events"}, {"method", "POST"},
                       {"payload", proto::sha256_hex(body)}});
  auto json = *proto::base64_decode(header.substr(6));
  auto pos = json.find("\"sig\":\"") + 7;
  json[pos] = json[pos] == '0' ? '1' : '0';
  submit("Nostr " + proto::base64_encode(json), body);
  ASSERT_EQ(replies.size(), 1u);
  EXPECT_EQ(replies[0].http_status, 401);
  EXPECT_NE(replies[0].message.find("signature is invalid"), std::string::npos);
  EXPECT_TRUE(port->kinds.empty());
}

TEST_F(HttpSubmitTest, AnEmptyBodyIsA400AndRecordsNothing) {
  submit(nip98({{"u", "http://relay.test/events"}, {"method", "POST"}}), "");
  ASSERT_EQ(replies.size(), 1u);
  EXPECT_EQ(replies[0].http_status, 400);
  EXPECT_EQ(replies[0].message, "invalid: empty body, expected an event");
  EXPECT_TRUE(port->kinds.empty());
}

TEST_F(HttpSubmitTest, AnAuthorizedRequestRecordsItsInputThenItsAnswer) {
  // Admitted by NIP-98, then refused by admission (an AUTH event is never
  // stored): no peer is needed, and the answer comes from the outcome table.
  auto body = test::event_builder{alice_sk}.kind(22242).at(now).sign().raw;
  submit(nip98({{"u", "http://relay.test/events"}, {"method", "POST"},
                {"payload", proto::sha256_hex(body)}}),
         body);
  ASSERT_EQ(replies.size(), 1u);
  EXPECT_EQ(replies[0].http_status, 400);
  EXPECT_EQ(replies[0].message, "invalid: kind 22242 is only accepted in AUTH messages");
  EXPECT_EQ(port->kinds, (std::vector<std::string>{"http_in", "http_out"}));
}

}  // namespace
}  // namespace waggle::testing
