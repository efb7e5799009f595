// The bus conformance suite (docs/bus.md, "Conformance"): the same tests
// against every driver. Each waits on a subscriber's inbox with a deadline;
// "nothing arrived" is shown by what arrives first after a later publish,
// since a driver delivers one publisher's messages on a subject in order.

#include <gtest/gtest.h>

#include <map>
#include <set>

#include "tests/actors/bus/bus_harness.hpp"

namespace waggle::testing {
namespace {

struct bus_conformance : ::testing::TestWithParam<std::string> {
  std::unique_ptr<bus_harness> h;

  void SetUp() override { h = make_bus_harness(GetParam()); }
  void TearDown() override { h.reset(); }

  caf::actor_system& sys(size_t node = 0) { return h->system(node); }
  bus_actor bus(size_t node = 0) { return h->bus(node); }

  std::shared_ptr<bus_inbox> subscribe(const std::string& subject, const std::string& group = "",
                                       size_t node = 0, bool replies = false,
                                       uint64_t* id = nullptr) {
    auto inbox = std::make_shared<bus_inbox>();
    auto sub = spawn_bus_subscriber(sys(node), inbox, replies ? bus(node) : bus_actor{});
    auto r = bus_subscribe_to(sys(node), bus(node), bus_subscribe{subject, group, sub});
    EXPECT_TRUE(r) << to_string(r.error());
    if (r && id)
      *id = r->id;
    return inbox;
  }

  void publish(const std::string& subject, const std::string& payload, size_t node = 0) {
    auto r = bus_publish_to(sys(node), bus(node), bus_publish{subject, payload, ""});
    ASSERT_TRUE(r) << to_string(r.error());
  }

  static std::string payload_of(const std::optional<bus_message>& m) {
    return m ? m->payload : std::string{"<nothing>"};
  }
};

TEST_P(bus_conformance, EverySubscriberGetsEveryMessageInOrder) {
  std::vector<std::shared_ptr<bus_inbox>> subs;
  for (int i = 0; i < 3; ++i)
    subs.push_back(subscribe("fan.out"));
  for (int i = 0; i < 20; ++i)
    publish("fan.out", "m" + std::to_string(i));
  for (auto& s : subs)
    for (int i = 0; i < 20; ++i) {
      auto m = s->next();
      ASSERT_TRUE(m) << "message " << i << " never arrived";
      EXPECT_EQ(m->subject, "fan.out");
      EXPECT_EQ(m->payload, "m" + std::to_string(i));
      EXPECT_TRUE(m->reply_to.empty());
    }
}

TEST_P(bus_conformance, EachQueueGroupGetsEachMessageOnceSpreadOverItsMembers) {
  std::map<std::string, std::vector<std::shared_ptr<bus_inbox>>> groups;
  for (const char* g : {"workers", "auditors"})
    for (int i = 0; i < 3; ++i)
      groups[g].push_back(subscribe("jobs", g));
  auto plain = subscribe("jobs");
  const int n = 30;
  for (int i = 0; i < n; ++i)
    publish("jobs", std::to_string(i));
  // The plain subscriber's copies come in order; when it has them all, each
  // group member has had its share delivered to its mailbox as well.
  for (int i = 0; i < n; ++i)
    ASSERT_EQ(payload_of(plain->next()), std::to_string(i));
  for (auto& [name, members] : groups) {
    std::multiset<std::string> seen;
    size_t members_used = 0;
    for (auto& m : members) {
      size_t mine = 0;
      while (auto msg = m->next(std::chrono::milliseconds{members_used == 0 ? 2000 : 500})) {
        seen.insert(msg->payload);
        ++mine;
        if (seen.size() == static_cast<size_t>(n))
          break;
      }
      members_used += mine > 0;
    }
    EXPECT_EQ(seen.size(), static_cast<size_t>(n)) << name << " did not get every message once";
    for (int i = 0; i < n; ++i)
      EXPECT_EQ(seen.count(std::to_string(i)), 1u) << name << ": message " << i;
    EXPECT_GT(members_used, 1u) << name << ": every message went to one member";
  }
}

TEST_P(bus_conformance, NothingPublishedBeforeTheSubscribeIsDelivered) {
  auto early = subscribe("before");  // the subject is live on the node already
  publish("before", "old");
  ASSERT_EQ(payload_of(early->next()), "old");
  auto late = subscribe("before");
  publish("before", "new");
  EXPECT_EQ(payload_of(late->next()), "new") << "the late subscriber's first message";
  EXPECT_EQ(payload_of(early->next()), "new");
}

TEST_P(bus_conformance, ARequestIsAnsweredByASubscriber) {
  auto responder = subscribe("svc.echo", "", 0, true);
  auto r = bus_request_of(sys(), bus(), bus_request{"svc.echo", "ping", 10000});
  ASSERT_TRUE(r) << to_string(r.error());
  EXPECT_EQ(r->payload, "re:ping");
  auto seen = responder->next();
  ASSERT_TRUE(seen);
  EXPECT_FALSE(seen->reply_to.empty()) << "the responder saw where to answer";
}

TEST_P(bus_conformance, ARequestNobodyListensToFailsAtOnceWithNoResponders) {
  subscribe("svc.other");
  auto started = std::chrono::steady_clock::now();
  // A deadline far longer than the test's: only a prompt answer passes.
  auto r = bus_request_of(sys(), bus(), bus_request{"svc.nobody", "ping", 600000});
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error(), make_error(bus_errc::no_responders, "svc.nobody"));
  EXPECT_LT(std::chrono::steady_clock::now() - started, std::chrono::seconds{60});
}

TEST_P(bus_conformance, ARequestWithoutAnAnswerTimesOut) {
  auto mute = subscribe("svc.mute");  // subscribes, never answers
  auto r = bus_request_of(sys(), bus(), bus_request{"svc.mute", "ping", 300});
  ASSERT_FALSE(r);
  EXPECT_EQ(static_cast<bus_errc>(r.error().code()), bus_errc::request_timeout);
  EXPECT_TRUE(mute->next()) << "the request was delivered";
}

TEST_P(bus_conformance, AMebibytePayloadArrivesWholeAndOneByteMoreIsRefused) {
  auto s = subscribe("big");
  std::string payload(bus_max_payload, '\0');
  for (size_t i = 0; i < payload.size(); ++i)
    payload[i] = static_cast<char>(i * 131 % 251);
  publish("big", payload);
  auto m = s->next();
  ASSERT_TRUE(m);
  EXPECT_EQ(m->payload.size(), payload.size());
  EXPECT_TRUE(m->payload == payload) << "the payload changed on its way";
  auto r = bus_publish_to(sys(), bus(), bus_publish{"big", payload + "x", ""});
  ASSERT_FALSE(r);
  EXPECT_EQ(static_cast<bus_errc>(r.error().code()), bus_errc::payload_too_large);
  publish("big", "after");
  EXPECT_EQ(payload_of(s->next()), "after") << "the refused message was not delivered";
}

TEST_P(bus_conformance, AnUnsubscribedSubscriberGetsNothingMore) {
  uint64_t id = 0;
  auto gone = subscribe("unsub", "", 0, false, &id);
  auto stays = subscribe("unsub");
  caf::scoped_actor self{sys()};
  self->send(bus(), bus_unsubscribe{id});  // with a sender: the CAF driver drops anonymous ones
  publish("unsub", "missed");
  ASSERT_EQ(payload_of(stays->next()), "missed");
  // Subscribed again (a new subscription on the same inbox): the first
  // message it gets is the one published after, so "missed" never came.
  auto sub = spawn_bus_subscriber(sys(), gone);
  ASSERT_TRUE(bus_subscribe_to(sys(), bus(), bus_subscribe{"unsub", "", sub}));
  publish("unsub", "back");
  EXPECT_EQ(payload_of(gone->next()), "back");
}

TEST_P(bus_conformance, ASubscriberThatTerminatesIsForgotten) {
  auto inbox = std::make_shared<bus_inbox>();
  auto sub = spawn_bus_subscriber(sys(), inbox);
  ASSERT_TRUE(bus_subscribe_to(sys(), bus(), bus_subscribe{"svc.gone", "", sub}));
  {
    caf::scoped_actor self{sys()};
    self->monitor(sub);
    self->send_exit(sub, caf::exit_reason::user_shutdown);
    self->receive([](caf::down_msg&) {});
  }
  sub = nullptr;
  // The bus learns of the exit from its own monitor, asynchronously: a
  // request gets no_responders once it has.
  caf::error last;
  for (int i = 0; i < 100; ++i) {
    auto r = bus_request_of(sys(), bus(), bus_request{"svc.gone", "ping", 200});
    last = r ? caf::error{} : r.error();
    if (!r && static_cast<bus_errc>(r.error().code()) == bus_errc::no_responders)
      break;
  }
  EXPECT_EQ(static_cast<bus_errc>(last.code()), bus_errc::no_responders);
}

TEST_P(bus_conformance, BadSubjectsAndGroupsAreRefusedWithAClearError) {
  auto sub = spawn_bus_subscriber(sys(), std::make_shared<bus_inbox>());
  for (std::string bad : {std::string{}, std::string(bus_max_subject + 1, 'a'),
                          std::string{"with space"}, std::string{"tab\t"},
                          std::string{"caf\xc3\xa9"}, std::string{"nul\0x", 5}}) {
    auto p = bus_publish_to(sys(), bus(), bus_publish{bad, "x", ""});
    ASSERT_FALSE(p);
    EXPECT_EQ(static_cast<bus_errc>(p.error().code()), bus_errc::bad_subject);
    auto s = bus_subscribe_to(sys(), bus(), bus_subscribe{bad, "", sub});
    ASSERT_FALSE(s);
    EXPECT_EQ(static_cast<bus_errc>(s.error().code()), bus_errc::bad_subject);
    auto q = bus_request_of(sys(), bus(), bus_request{bad, "x", 100});
    ASSERT_FALSE(q);
    EXPECT_EQ(static_cast<bus_errc>(q.error().code()), bus_errc::bad_subject);
    if (!bad.empty()) {
      auto g = bus_subscribe_to(sys(), bus(), bus_subscribe{"ok", bad, sub});
      ASSERT_FALSE(g);
      EXPECT_EQ(static_cast<bus_errc>(g.error().code()), bus_errc::bad_group);
    }
  }
  EXPECT_TRUE(bus_publish_to(sys(), bus(), bus_publish{std::string(bus_max_subject, 'a'), "", ""}))
    << "the longest subject and an empty payload are fine";
  EXPECT_TRUE(bus_publish_to(sys(), bus(), bus_publish{"x';DROP_TABLE_events;--", "", ""}))
    << "a subject is text, never SQL";
}

// The networked drivers, with two nodes in one process.
struct bus_two_nodes : bus_conformance {};

TEST_P(bus_two_nodes, ASubscriberOnAnotherNodeGetsTheMessages) {
  ASSERT_GE(h->nodes(), 2u);
  auto local = subscribe("two.nodes", "", 0);
  auto remote = subscribe("two.nodes", "", 1);
  auto remote_group = subscribe("two.nodes", "solo", 1);
  for (int i = 0; i < 5; ++i)
    publish("two.nodes", std::to_string(i), 0);
  for (int i = 0; i < 5; ++i) {
    EXPECT_EQ(payload_of(local->next()), std::to_string(i));
    EXPECT_EQ(payload_of(remote->next()), std::to_string(i));
    EXPECT_EQ(payload_of(remote_group->next()), std::to_string(i));
  }
  auto responder = subscribe("svc.remote", "", 1, true);
  auto r = bus_request_of(sys(0), bus(0), bus_request{"svc.remote", "hi", 10000});
  ASSERT_TRUE(r) << to_string(r.error());
  EXPECT_EQ(r->payload, "re:hi");
}

INSTANTIATE_TEST_SUITE_P(drivers, bus_conformance,
                         ::testing::Values("inproc", "postgres", "caf", "nats"),
                         [](const auto& info) { return info.param; });
INSTANTIATE_TEST_SUITE_P(drivers, bus_two_nodes, ::testing::Values("postgres", "caf", "nats"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace waggle::testing
