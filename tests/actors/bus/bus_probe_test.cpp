// The node's presence on the bus (actors/bus/bus_probe.hpp): it answers a
// ping to itself and, as one member of the queue group "any", a cluster-wide
// ping; it times its probes round the bus and counts one not back by its
// deadline as lost. Under the test coordinator: time moves only when the
// test says.

#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "actors/bus/bus_probe.hpp"
#include "actors/bus/inproc_bus.hpp"
#include "tests/actors/actor_fixture.hpp"

namespace waggle {
namespace {

using namespace std::chrono_literals;

// What a request got: the reply's payload or the error.
struct answer {
  std::optional<std::string> payload;
  std::optional<caf::error> error;
};

// Asks `bus` one request, as `waggle bus request` does.
caf::behavior asker(caf::event_based_actor* self, bus_actor bus, bus_request req,
                    std::shared_ptr<answer> out) {
  self->request(bus, caf::infinite, std::move(req))
    .then([out](bus_message& m) { out->payload = m.payload; },
          [out](caf::error& e) { out->error = e; });
  return {[](int) {}};
}

// A bus the test drives by hand: subscribes and publishes are answered at
// once and kept; nothing is delivered unless the test sends it.
struct fake_bus_log {
  std::vector<bus_subscribe> subscribes;
  std::vector<bus_publish> publishes;
};

bus_actor::behavior_type fake_bus(bus_actor::pointer, std::shared_ptr<fake_bus_log> log) {
  return {
    [log](bus_publish& p) {
      log->publishes.push_back(p);
      return bus_ack{log->publishes.size()};
    },
    [log](bus_subscribe& s) {
      log->subscribes.push_back(s);
      return bus_subscription{log->subscribes.size()};
    },
    [](bus_unsubscribe) {},
    [](bus_request&) -> caf::result<bus_message> {
      return make_error(bus_errc::no_responders);
    },
  };
}

// A bus that takes everything and answers nothing (a driver stuck on its
// transport): the promises are kept, never delivered.
struct silent_bus_log {
  std::vector<caf::typed_response_promise<bus_subscription>> subscribes;
};

bus_actor::behavior_type silent_bus(bus_actor::pointer self, std::shared_ptr<silent_bus_log> log) {
  return {
    [self](bus_publish&) -> caf::result<bus_ack> { return self->make_response_promise<bus_ack>(); },
    [self, log](bus_subscribe&) {
      log->subscribes.push_back(self->make_response_promise<bus_subscription>());
      return log->subscribes.back();
    },
    [](bus_unsubscribe) {},
    [self](bus_request&) -> caf::result<bus_message> {
      return self->make_response_promise<bus_message>();
    },
  };
}

class BusProbeTest : public testing::actor_test {
 protected:
  bus_probe_settings settings(const std::string& node_id) {
    bus_probe_settings s;
    s.node_id = node_id;
    s.interval = 10s;
    s.deadline = 5s;
    return s;
  }

  std::shared_ptr<answer> ask(bus_actor bus, const std::string& subject) {
    auto out = std::make_shared<answer>();
    spawn(asker, bus, bus_request{subject, "{}", 1000}, out);
    run();
    return out;
  }
};

TEST_F(BusProbeTest, AnswersAPingToItsNodeOnTheReplyTo) {
  auto env = test_env();
  auto bus = spawn(inproc_bus_impl, env.for_actor("bus"));
  spawn(bus_probe_impl, bus, settings("n1"), env.for_actor("bus_probe"));
  run();
  auto got = ask(bus, "waggle.node.n1.ping");
  ASSERT_TRUE(got->payload) << (got->error ? sys().render(*got->error) : "no answer");
  EXPECT_EQ(*got->payload, "{\"node\":\"n1\",\"version\":\"0.1.0\"}");
  EXPECT_EQ(env.stats->bus.pings_answered, 1u);
  // Another node's ping is nobody's here.
  auto other = ask(bus, "waggle.node.n2.ping");
  ASSERT_TRUE(other->error);
  EXPECT_EQ(other->error->code(), static_cast<uint8_t>(bus_errc::no_responders));
}

TEST_F(BusProbeTest, AClusterPingIsAnsweredByExactlyOneNodeInTurn) {
  auto env1 = test_env();
  auto env2 = test_env();
  auto bus = spawn(inproc_bus_impl, env1.for_actor("bus"));
  spawn(bus_probe_impl, bus, settings("n1"), env1.for_actor("bus_probe"));
  spawn(bus_probe_impl, bus, settings("n2"), env2.for_actor("bus_probe"));
  run();
  auto first = ask(bus, bus_cluster_ping_subject);
  ASSERT_TRUE(first->payload);
  EXPECT_EQ(env1.stats->bus.pings_answered + env2.stats->bus.pings_answered, 1u);
  auto second = ask(bus, bus_cluster_ping_subject);
  ASSERT_TRUE(second->payload);
  EXPECT_EQ(env1.stats->bus.pings_answered, 1u);
  EXPECT_EQ(env2.stats->bus.pings_answered, 1u);
  // The queue group took its members in turn: each node answered one.
  EXPECT_NE(*first->payload, *second->payload);
}

TEST_F(BusProbeTest, SubscribesToItsThreeSubjects) {
  auto log = std::make_shared<fake_bus_log>();
  auto bus = spawn(fake_bus, log);
  spawn(bus_probe_impl, bus, settings("n1"), test_env().for_actor("bus_probe"));
  run();
  ASSERT_EQ(log->subscribes.size(), 3u);
  EXPECT_EQ(log->subscribes[0].subject, "waggle.node.n1.ping");
  EXPECT_EQ(log->subscribes[0].group, "");
  EXPECT_EQ(log->subscribes[1].subject, "waggle.cluster.ping");
  EXPECT_EQ(log->subscribes[1].group, "any");
  EXPECT_EQ(log->subscribes[2].subject, "waggle.node.n1.probe");
  EXPECT_TRUE(log->publishes.empty());  // the first probe waits for the interval
}

TEST_F(BusProbeTest, AProbeBackIsTimedRoundTheBus) {
  auto env = test_env();
  auto log = std::make_shared<fake_bus_log>();
  auto bus = spawn(fake_bus, log);
  auto probe = spawn(bus_probe_impl, bus, settings("n1"), env.for_actor("bus_probe"));
  run();
  sched().advance_time(10s);
  run();
  ASSERT_EQ(log->publishes.size(), 1u);
  EXPECT_EQ(log->publishes[0].subject, "waggle.node.n1.probe");
  EXPECT_EQ(log->publishes[0].payload, "{\"node\":\"n1\",\"probe\":1}");
  EXPECT_EQ(env.stats->bus.probes_sent, 1u);
  // The bus takes 30 ms to bring it back.
  sched().advance_time(30ms);
  caf::anon_send(probe, bus_message{log->publishes[0].subject, log->publishes[0].payload, ""});
  run();
  EXPECT_EQ(env.stats->bus.probes_returned, 1u);
  EXPECT_EQ(env.stats->bus.probe_rtt_us, 30'000);
  // Its deadline passes with nothing to count.
  sched().advance_time(5s);
  run();
  EXPECT_EQ(env.stats->bus.probes_lost, 0u);
}

TEST_F(BusProbeTest, AProbeNotBackByItsDeadlineIsLostAndALateOneIsNotCounted) {
  auto env = test_env();
  auto log = std::make_shared<fake_bus_log>();
  auto bus = spawn(fake_bus, log);
  auto probe = spawn(bus_probe_impl, bus, settings("n1"), env.for_actor("bus_probe"));
  run();
  sched().advance_time(10s);
  run();
  ASSERT_EQ(log->publishes.size(), 1u);
  sched().advance_time(5s);
  run();
  EXPECT_EQ(env.stats->bus.probes_lost, 1u);
  caf::anon_send(probe, bus_message{log->publishes[0].subject, log->publishes[0].payload, ""});
  run();
  EXPECT_EQ(env.stats->bus.probes_returned, 0u);
  // The next interval sends probe 2.
  sched().advance_time(5s);
  run();
  ASSERT_EQ(log->publishes.size(), 2u);
  EXPECT_EQ(log->publishes[1].payload, "{\"node\":\"n1\",\"probe\":2}");
}

TEST_F(BusProbeTest, APingWithoutReplyToAndForeignPayloadsAreIgnored) {
  auto env = test_env();
  auto log = std::make_shared<fake_bus_log>();
  auto bus = spawn(fake_bus, log);
  auto probe = spawn(bus_probe_impl, bus, settings("n1"), env.for_actor("bus_probe"));
  run();
  caf::anon_send(probe, bus_message{"waggle.node.n1.ping", "{}", ""});
  caf::anon_send(probe, bus_message{"waggle.node.n1.probe", "not json", ""});
  caf::anon_send(probe, bus_message{"waggle.node.n1.probe", "{\"probe\":7}", ""});
  run();
  EXPECT_TRUE(log->publishes.empty());
  EXPECT_EQ(env.stats->bus.pings_answered, 0u);
  EXPECT_EQ(env.stats->bus.probes_returned, 0u);
}

TEST_F(BusProbeTest, ASubscribeTheBusNeverAnswersIsAskedAgainAfterItsBound) {
  auto log = std::make_shared<silent_bus_log>();
  auto bus = spawn(silent_bus, log);
  spawn(bus_probe_impl, bus, settings("n1"), test_env().for_actor("bus_probe"));
  run();
  ASSERT_EQ(log->subscribes.size(), 3u);
  sched().advance_time(10s);  // a tick while all three wait: nothing asked twice
  run();
  EXPECT_EQ(log->subscribes.size(), 3u);
  sched().advance_time(20s);  // 30 s: the waits time out
  run();
  sched().advance_time(10s);  // the next tick asks again
  run();
  EXPECT_EQ(log->subscribes.size(), 6u);
}

}  // namespace
}  // namespace waggle
