// The NATS bus driver beyond the conformance suite (docs/bus.md, "NATS"):
// the subject mapping, wildcard-looking subjects that stay exact, a server
// restart, a prompt "no responders", the server's max_payload, a queue
// group across nodes, a subscriber joining a shared subscription, and a
// slow consumer's drops.

#include <gtest/gtest.h>

#include <map>
#include <set>
#include <thread>

#include "actors/bus/nats_bus.hpp"
#include "actors/bus/nats_subject.hpp"
#include "messages/register_types.hpp"
#include "tests/actors/bus/bus_harness.hpp"
#include "tests/support/nats_server.hpp"

namespace waggle::testing {
namespace {

using namespace std::chrono_literals;

bool eventually(const std::function<bool()>& cond, std::chrono::milliseconds within = 10s) {
  auto until = std::chrono::steady_clock::now() + within;
  while (std::chrono::steady_clock::now() < until) {
    if (cond())
      return true;
    std::this_thread::sleep_for(20ms);
  }
  return cond();
}

std::string payload_of(const std::optional<bus_message>& m) {
  return m ? m->payload : std::string{"<nothing>"};
}

TEST(nats_subject_map, KeepsDotsAndEscapesWhatNatsWouldReadAsSomethingElse) {
  EXPECT_EQ(nats_subject("waggle.node.n1.ping"), "waggle.node.n1.ping");
  EXPECT_EQ(nats_subject("a.*"), "a.%2A");
  EXPECT_EQ(nats_subject("a.>"), "a.%3E");
  EXPECT_EQ(nats_subject("*"), "%2A");
  EXPECT_EQ(nats_subject("a*b>c"), "a%2Ab%3Ec");
  EXPECT_EQ(nats_subject("100%"), "100%25");
  EXPECT_EQ(nats_subject("$SYS.x"), "%24SYS.x");
  EXPECT_EQ(nats_subject("a.$b"), "a.$b");
  EXPECT_EQ(nats_subject("a..b"), "a.%.b");
  EXPECT_EQ(nats_subject(".a."), "%.a.%");
  EXPECT_EQ(nats_queue("work.ers*"), "work%2Eers%2A");
  for (const std::string& s : std::vector<std::string>{
         "a.*", "a.>", "$SYS.x", "a..b", ".", "..", "%", "%2A", "x';DROP;--", "_INBOX.n.0a1b.7",
         std::string(bus_max_subject, '>')}) {
    auto back = bus_subject_of(nats_subject(s));
    ASSERT_TRUE(back) << s;
    EXPECT_EQ(*back, s);
  }
  // Only images of bus subjects decode, and only their canonical form.
  EXPECT_FALSE(bus_subject_of("a.%62")) << "not canonical: a.b is written a.b";
  EXPECT_FALSE(bus_subject_of("a.%2"));
  EXPECT_FALSE(bus_subject_of("a.%zz"));
  EXPECT_FALSE(bus_subject_of("a..b"));
  EXPECT_FALSE(bus_subject_of("%00"));
}

struct nats_bus : ::testing::Test {
  std::shared_ptr<nats_test_server> server = std::make_shared<nats_test_server>();
  std::unique_ptr<bus_harness> h;

  void SetUp() override { h = make_nats_bus_harness(server); }
  void TearDown() override { h.reset(); }

  std::shared_ptr<bus_inbox> subscribe(size_t node, const std::string& subject,
                                       const std::string& group = "", bool replies = false) {
    auto inbox = std::make_shared<bus_inbox>();
    auto sub =
      spawn_bus_subscriber(h->system(node), inbox, replies ? h->bus(node) : bus_actor{});
    auto r = bus_subscribe_to(h->system(node), h->bus(node), bus_subscribe{subject, group, sub});
    EXPECT_TRUE(r) << to_string(r.error());
    return inbox;
  }
  caf::expected<bus_ack> publish(size_t node, const std::string& subject,
                                 const std::string& payload) {
    return bus_publish_to(h->system(node), h->bus(node), bus_publish{subject, payload, ""});
  }
};

TEST_F(nats_bus, WildcardLookingSubjectsNeverCrossDeliver) {
  std::map<std::string, std::shared_ptr<bus_inbox>> subs;
  for (const char* s : {"a.b", "a.*", "a.>", "*", ">", "a.b.c"})
    subs[s] = subscribe(1, s);
  for (const char* s : {"a.*", "a.>", "*", ">", "a.b", "a.b.c"})
    ASSERT_TRUE(publish(0, s, std::string{"to "} + s));
  // Each got exactly the message of its own subject, and nothing before it.
  for (auto& [subject, inbox] : subs)
    EXPECT_EQ(payload_of(inbox->next()), "to " + subject) << subject;
  for (auto& [subject, inbox] : subs)
    ASSERT_TRUE(publish(0, subject, "end"));
  for (auto& [subject, inbox] : subs)
    EXPECT_EQ(payload_of(inbox->next()), "end") << subject << " got a message not its own";
}

TEST_F(nats_bus, AServerRestartResumesSubscriptionsAndPublishing) {
  auto sub = subscribe(1, "restart.x");
  auto responder = subscribe(1, "restart.svc", "", true);
  ASSERT_TRUE(publish(0, "restart.x", "before"));
  ASSERT_EQ(payload_of(sub->next()), "before");

  server->stop();
  ASSERT_TRUE(eventually([&] { return h->stats(0)->bus.peers == 0 && h->stats(1)->bus.peers == 0; }))
    << "the nodes did not notice the server go";
  // While it is down, a publish is buffered by libnats (acknowledged; sent
  // on reconnect, and delivered only if the subscriber's node has subscribed
  // again by then), and a subscribe is refused.
  EXPECT_TRUE(publish(0, "restart.x", "during"));
  auto inbox = std::make_shared<bus_inbox>();
  auto r = bus_subscribe_to(h->system(1), h->bus(1),
                            bus_subscribe{"restart.y", "", spawn_bus_subscriber(h->system(1), inbox)});
  ASSERT_FALSE(r);
  EXPECT_EQ(static_cast<bus_errc>(r.error().code()), bus_errc::unavailable);

  server->start();
  ASSERT_TRUE(eventually([&] { return h->stats(0)->bus.peers == 1 && h->stats(1)->bus.peers == 1; }))
    << "the nodes did not reconnect";
  // The subscription came back without the subscriber doing anything, and
  // its subscriber heard that it may have missed messages.
  std::string got;
  for (int i = 0; i < 100 && got.rfind("after", 0) != 0; ++i) {
    ASSERT_TRUE(publish(0, "restart.x", "after" + std::to_string(i)));
    while (auto m = sub->next(100ms)) {
      got = m->payload;
      if (got.rfind("after", 0) == 0)
        break;
      EXPECT_EQ(got, "during") << "only the buffered message may come before";
    }
  }
  EXPECT_EQ(got.rfind("after", 0), 0u) << "no message after the restart arrived";
  EXPECT_GT(sub->lags(), 0u) << "the subscriber was not told of the gap";
  auto reply = bus_request_of(h->system(0), h->bus(0), bus_request{"restart.svc", "hi", 10000});
  ASSERT_TRUE(reply) << to_string(reply.error());
  EXPECT_EQ(reply->payload, "re:hi");
}

TEST_F(nats_bus, NoRespondersIsPromptOnEveryNode) {
  subscribe(1, "svc.somebody", "", true);
  for (size_t node : {0u, 1u}) {
    auto started = std::chrono::steady_clock::now();
    auto r = bus_request_of(h->system(node), h->bus(node), bus_request{"svc.nobody", "x", 30000});
    auto took = std::chrono::steady_clock::now() - started;
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error(), make_error(bus_errc::no_responders, "svc.nobody"));
    EXPECT_LT(took, 1s) << "no_responders waited for the deadline";
  }
  auto r = bus_request_of(h->system(0), h->bus(0), bus_request{"svc.somebody", "x", 10000});
  ASSERT_TRUE(r) << to_string(r.error());
}

TEST_F(nats_bus, AQueueGroupAcrossNodesGetsEachMessageOnce) {
  std::vector<std::shared_ptr<bus_inbox>> members;
  for (size_t node : {0u, 0u, 1u, 1u})
    members.push_back(subscribe(node, "q.jobs", "workers"));
  auto plain = subscribe(0, "q.jobs");
  const int n = 200;
  for (int i = 0; i < n; ++i)
    ASSERT_TRUE(publish(i % 2, "q.jobs", std::to_string(i)));
  std::map<int, int> seen_by_node;
  std::multiset<std::string> seen;
  for (int i = 0; i < n; ++i)
    ASSERT_TRUE(plain->next()) << "the plain subscriber missed " << i;
  for (size_t k = 0; k < members.size(); ++k)
    while (auto m = members[k]->next(seen.size() == static_cast<size_t>(n) ? 200ms : 1000ms)) {
      seen.insert(m->payload);
      ++seen_by_node[k < 2 ? 0 : 1];
    }
  EXPECT_EQ(seen.size(), static_cast<size_t>(n));
  for (int i = 0; i < n; ++i)
    EXPECT_EQ(seen.count(std::to_string(i)), 1u) << "message " << i;
  EXPECT_GT(seen_by_node[0], 0) << "NATS never chose node 0";
  EXPECT_GT(seen_by_node[1], 0) << "NATS never chose node 1";
}

TEST_F(nats_bus, ASubscriberJoiningASharedSubscriptionGetsNothingPublishedBefore) {
  auto first = subscribe(0, "join");
  // Acknowledged publishes of this node that may still be on their way
  // through the server when the second subscriber joins.
  const int n = 2000;
  for (int i = 0; i < n; ++i)
    ASSERT_TRUE(publish(0, "join", "old" + std::to_string(i)));
  auto late = subscribe(0, "join");
  ASSERT_TRUE(publish(0, "join", "new"));
  EXPECT_EQ(payload_of(late->next()), "new") << "the late subscriber got an older message";
  for (int i = 0; i < n; ++i)
    ASSERT_EQ(payload_of(first->next()), "old" + std::to_string(i));
  EXPECT_EQ(payload_of(first->next()), "new");
}

TEST_F(nats_bus, ASlowConsumersDropsAreCountedAndReported) {
  h.reset();
  h = make_nats_bus_harness(server, [](size_t, nats_bus_settings& s) { s.max_in_flight = 1; });
  auto sub = subscribe(1, "slow");
  uint64_t sent = 0;
  for (int batch = 0; batch < 20 && h->stats(1)->bus.dropped("slow_consumer") == 0; ++batch)
    for (int i = 0; i < 2000; ++i, ++sent)
      ASSERT_TRUE(publish(0, "slow", "m"));
  ASSERT_GT(h->stats(1)->bus.dropped("slow_consumer"), 0u) << "nothing was ever dropped";
  // Drops are reported with the next message that gets through.
  std::string last;
  uint64_t received = 0;
  for (int i = 0; i < 100 && last != "end"; ++i) {
    ASSERT_TRUE(publish(0, "slow", "end"));
    ++sent;
    while (auto m = sub->next(100ms)) {
      ++received;
      last = m->payload;
    }
  }
  EXPECT_EQ(last, "end");
  EXPECT_GT(sub->lags(), 0u) << "the subscriber was not told of its losses";
  EXPECT_TRUE(eventually([&] {
    while (sub->next(10ms))
      ++received;
    return received + h->stats(1)->bus.dropped("slow_consumer") == sent;
  })) << "every message is either delivered or counted as dropped: " << received << " + "
      << h->stats(1)->bus.dropped("slow_consumer") << " != " << sent;
}

TEST(nats_bus_start, RefusesAServerThatTakesLessThanABusPayload) {
  nats_test_server small{512 * 1024};
  struct config : caf::actor_system_config {
    config() { register_types(*this); }
  } cfg;
  caf::actor_system sys{cfg};
  nats_bus_settings s;
  s.url = small.url();
  s.node_id = "small";
  auto env = node_env::production();
  env.stats = std::make_shared<metrics>();
  auto bus = spawn_nats_bus(sys, s, env);
  ASSERT_FALSE(bus);
  EXPECT_EQ(static_cast<bus_errc>(bus.error().code()), bus_errc::unavailable);
  EXPECT_NE(sys.render(bus.error()).find("max_payload"), std::string::npos)
    << sys.render(bus.error());
}

TEST(nats_bus_start, RefusesAnUnreachableServerClearly) {
  uint16_t port = 0;
  {
    nats_test_server gone;
    port = gone.port();
  }
  struct config : caf::actor_system_config {
    config() { register_types(*this); }
  } cfg;
  caf::actor_system sys{cfg};
  nats_bus_settings s;
  s.url = "nats://127.0.0.1:" + std::to_string(port);
  s.node_id = "lonely";
  s.connect_timeout = 500ms;
  auto env = node_env::production();
  auto bus = spawn_nats_bus(sys, s, env);
  ASSERT_FALSE(bus);
  EXPECT_EQ(static_cast<bus_errc>(bus.error().code()), bus_errc::unavailable);
}

}  // namespace
}  // namespace waggle::testing
