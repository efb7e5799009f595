// The CAF bus driver's cluster behaviour (docs/bus.md, "CAF"): nodes find
// each other through the registry, survive a peer's death and forget it
// after expiry, refuse another protocol version, and count and drop what a
// peer sends that does not decode.

#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include <caf/binary_serializer.hpp>
#include <caf/io/middleman.hpp>
#include <pqxx/pqxx>

#include "actors/bus/caf_bus_settings.hpp"
#include "messages/register_types.hpp"
#include "tests/actors/bus/bus_harness.hpp"

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

struct caf_bus : ::testing::Test {
  std::unique_ptr<bus_harness> h;

  std::shared_ptr<bus_inbox> subscribe(size_t node, const std::string& subject) {
    auto inbox = std::make_shared<bus_inbox>();
    auto sub = spawn_bus_subscriber(h->system(node), inbox);
    auto r = bus_subscribe_to(h->system(node), h->bus(node), bus_subscribe{subject, "", sub});
    EXPECT_TRUE(r) << to_string(r.error());
    return inbox;
  }

  int registered(const std::string& node_id) {
    pqxx::connection c(h->database_url());
    pqxx::nontransaction q(c);
    return q.exec_params("SELECT count(*) FROM bus_nodes WHERE node_id = $1", node_id)[0][0]
      .as<int>();
  }

  uint16_t port_of(const std::string& node_id) {
    pqxx::connection c(h->database_url());
    pqxx::nontransaction q(c);
    return static_cast<uint16_t>(
      q.exec_params("SELECT port FROM bus_nodes WHERE node_id = $1", node_id)[0][0].as<int>());
  }
};

TEST_F(caf_bus, ThreeNodesFindEachOtherThroughTheRegistry) {
  h = make_caf_bus_harness(3);
  for (size_t i = 0; i < 3; ++i)
    EXPECT_EQ(h->stats(i)->bus.peers.load(), 2) << "node " << i;
  auto one = subscribe(1, "everywhere");
  auto two = subscribe(2, "everywhere");
  ASSERT_TRUE(bus_publish_to(h->system(0), h->bus(0), bus_publish{"everywhere", "hi", ""}));
  EXPECT_EQ(one->next()->payload, "hi");
  EXPECT_EQ(two->next()->payload, "hi");
}

TEST_F(caf_bus, AKilledNodesPeersKeepServingAndForgetItAfterExpiry) {
  h = make_caf_bus_harness(3, [](size_t, caf_bus_settings& s) {
    s.heartbeat = std::chrono::seconds{1};
    s.node_ttl = std::chrono::seconds{3};
  });
  auto one = subscribe(1, "survivors");
  h->kill(2);
  EXPECT_TRUE(eventually([&] {
    return h->stats(0)->bus.peers.load() == 1 && h->stats(1)->bus.peers.load() == 1;
  })) << "the peers did not notice the lost link";
  ASSERT_TRUE(bus_publish_to(h->system(0), h->bus(0), bus_publish{"survivors", "still", ""}));
  EXPECT_EQ(one->next()->payload, "still");
  EXPECT_TRUE(eventually([&] { return registered("caf-node-2") == 0; }))
    << "the dead node's registry row never expired";
  EXPECT_EQ(registered("caf-node-0"), 1) << "a live node expired";
  ASSERT_TRUE(bus_publish_to(h->system(1), h->bus(1), bus_publish{"survivors", "later", ""}));
  EXPECT_EQ(one->next()->payload, "later");
}

TEST_F(caf_bus, ANodeRestartedUnderItsIdHearsAndIsHeardAgain) {
  h = make_caf_bus_harness(2);
  auto zero = subscribe(0, "before");
  h->restart(1);
  // The new node 1 knows nothing of node 0's interest until node 0 tells
  // it, and node 0 must take the new facade for the old one.
  auto one = subscribe(1, "after");
  EXPECT_TRUE(eventually([&] {
    (void) bus_publish_to(h->system(1), h->bus(1), bus_publish{"before", "ping", ""});
    return zero->next(100ms).has_value();
  })) << "node 0 never heard the restarted node";
  EXPECT_TRUE(eventually([&] {
    (void) bus_publish_to(h->system(0), h->bus(0), bus_publish{"after", "pong", ""});
    return one->next(100ms).has_value();
  })) << "the restarted node never heard node 0";
}

// A peer that takes forwards but confirms none (its syncs go unanswered
// until it is told to catch up), standing in for a node that stopped
// reading: its own process (actor system and middleman port), registered
// like a node, so that node 0 connects to it. Node 0 sends it at most a
// window of forwards, then holds its publishers' acks instead of queueing
// without bound in the link.
struct stalled_peer_state {
  std::shared_ptr<std::atomic<int>> taken;
  std::vector<caf::typed_response_promise<bus_peer_frame>> syncs;
  bool stalled = true;
};

struct stalled_config : caf::actor_system_config {
  stalled_config() {
    register_types(*this);
    configure_caf_bus(*this, 1);
  }
};

caf_bus_actor::behavior_type stalled_peer(
  caf_bus_actor::stateful_pointer<stalled_peer_state> self,
  std::shared_ptr<std::atomic<int>> taken) {
  self->state.taken = std::move(taken);
  auto nothing = [] { return make_error(bus_errc::unavailable, "a stand-in"); };
  return {
    [nothing](bus_publish&) -> caf::result<bus_ack> { return nothing(); },
    [nothing](bus_subscribe&) -> caf::result<bus_subscription> { return nothing(); },
    [](bus_unsubscribe) {},
    [nothing](bus_request&) -> caf::result<bus_message> { return nothing(); },
    [self](bus_peer_frame& f) -> caf::result<bus_peer_frame> {
      if (f.kind == bus_frame_sync && f.node_id == "resume") {
        self->state.stalled = false;
        for (auto& rp : self->state.syncs)
          rp.deliver(bus_peer_frame{});
        self->state.syncs.clear();
        return bus_peer_frame{};
      }
      if (f.kind != bus_frame_sync || !self->state.stalled)
        return bus_peer_frame{};
      auto rp = self->make_response_promise<bus_peer_frame>();
      self->state.syncs.push_back(rp);
      return rp;
    },
    [self](bus_peer_forward&) { ++*self->state.taken; },
    [](bus_peers&) {},
    [](bus_request_expired&) {},
  };
}

TEST_F(caf_bus, APeerThatStopsReadingHoldsPublishersNotMemory) {
  h = make_caf_bus_harness(1, [](size_t, caf_bus_settings& s) { s.window = 64; });
  stalled_config cfg;
  caf::actor_system stand_in_sys{cfg};
  auto taken = std::make_shared<std::atomic<int>>(0);
  auto peer = stand_in_sys.spawn(stalled_peer, taken);
  auto port = stand_in_sys.middleman().publish(peer, 0, "127.0.0.1", true);
  ASSERT_TRUE(port);
  {
    pqxx::connection c(h->database_url());
    pqxx::nontransaction q(c);
    q.exec_params("INSERT INTO bus_nodes (node_id, address, port, protocol_version)"
                  " VALUES ('caf-stalled', '127.0.0.1', $1, 1)",
                  static_cast<int>(*port));
  }
  EXPECT_TRUE(eventually([&] { return h->stats(0)->bus.peers.load() == 1; }));
  // What the stand-in wants, sent from its process as a node would.
  std::vector<char> buf;
  caf::binary_serializer sink{stand_in_sys, buf};
  bus_interest wants{{"flow"}, {""}};
  ASSERT_FALSE(sink(wants));
  auto zero = stand_in_sys.middleman().remote_actor<caf_bus_actor>("127.0.0.1",
                                                                    port_of("caf-node-0"));
  ASSERT_TRUE(zero);
  caf::scoped_actor as_peer{stand_in_sys};
  as_peer->send(*zero, bus_peer_frame{"caf-stalled", bus_frame_interest,
                                      std::string(buf.begin(), buf.end())});

  constexpr int total = 1000;
  auto acked = std::make_shared<std::atomic<int>>(0);
  auto bus = h->bus(0);
  EXPECT_TRUE(eventually([&] {
    // Once node 0 knows the interest, a probe publish reaches the stand-in.
    (void) bus_publish_to(h->system(0), bus, bus_publish{"flow", "probe", ""});
    return taken->load() > 0;
  }));
  int before = taken->load();
  h->system(0).spawn([bus, acked](caf::event_based_actor* self) {
    for (int i = 0; i < total; ++i)
      self->request(bus, caf::infinite, bus_publish{"flow", std::to_string(i), ""})
        .then([acked](bus_ack) { ++*acked; });
  });
  EXPECT_TRUE(eventually([&] { return taken->load() >= 64; }));
  std::this_thread::sleep_for(500ms);  // nothing more may arrive: there is no step to wait for
  EXPECT_LE(taken->load(), 64) << "forwards beyond the window went to a peer that confirmed none";
  EXPECT_LT(acked->load(), total) << "every publish was acknowledged into an unbounded link";

  as_peer->send(peer, bus_peer_frame{"resume", bus_frame_sync, ""});
  EXPECT_TRUE(eventually([&] { return acked->load() == total && taken->load() >= total + before; }))
    << "acked " << acked->load() << ", taken " << taken->load() << " (" << before << " probes)";
  caf::anon_send_exit(peer, caf::exit_reason::user_shutdown);
}

TEST_F(caf_bus, ANodeOfAnotherProtocolVersionIsRefused) {
  h = make_caf_bus_harness(3, [](size_t node, caf_bus_settings& s) {
    if (node == 2)
      s.protocol_version = 2;
  });
  auto zero = subscribe(0, "versioned");
  // The odd node is registered, and refused by both sides: by the registry's
  // version before a connect, and by the BASP handshake's app identifier.
  EXPECT_TRUE(eventually([&] { return h->stats(0)->bus.dropped("peer_version") >= 1; }));
  EXPECT_EQ(h->stats(0)->bus.peers.load(), 1);
  EXPECT_EQ(h->stats(2)->bus.peers.load(), 0);
  auto direct = h->system(2).middleman().remote_actor<caf_bus_actor>("127.0.0.1",
                                                                      port_of("caf-node-0"));
  EXPECT_FALSE(direct) << "the handshake let a node of another version in";
  auto r = bus_request_of(h->system(2), h->bus(2), bus_request{"versioned", "x", 60000});
  ASSERT_FALSE(r);
  EXPECT_EQ(static_cast<bus_errc>(r.error().code()), bus_errc::no_responders);
  ASSERT_TRUE(bus_publish_to(h->system(2), h->bus(2), bus_publish{"versioned", "odd", ""}));
  ASSERT_TRUE(bus_publish_to(h->system(1), h->bus(1), bus_publish{"versioned", "even", ""}));
  EXPECT_EQ(zero->next()->payload, "even") << "a message crossed from the refused node";
}

TEST_F(caf_bus, AMalformedFrameFromAPeerIsCountedAndDropped) {
  h = make_caf_bus_harness(3);
  auto zero = subscribe(0, "robust");
  auto remote = h->system(1).middleman().remote_actor<caf_bus_actor>("127.0.0.1",
                                                                      port_of("caf-node-0"));
  ASSERT_TRUE(remote) << h->system(1).render(remote.error());
  const std::string garbage{"\xff\xff\xff\xff\x07garbage", 12};
  caf::scoped_actor self{h->system(1)};
  self->send(*remote, bus_peer_frame{"caf-node-1", bus_frame_forward, garbage});
  self->send(*remote, bus_peer_frame{"caf-node-1", bus_frame_interest, garbage});
  self->send(*remote, bus_peer_frame{"caf-node-1", 99, ""});
  self->send(*remote, bus_peer_frame{"not a node id!", bus_frame_forward, ""});
  self->send(*remote, bus_peer_forward{"caf-node-1", garbage});
  EXPECT_TRUE(eventually([&] { return h->stats(0)->bus.dropped("undecodable") == 5; }))
    << "dropped: " << h->stats(0)->bus.dropped("undecodable");
  // A well-formed forward that claims to be node 1 but comes from another
  // process (node 2's) is not delivered, nor are an interest frame claiming
  // node 1 or one naming a node the registry does not list; and the local-
  // only part of the published interface refuses a remote sender.
  auto from2 = h->system(2).middleman().remote_actor<caf_bus_actor>("127.0.0.1",
                                                                     port_of("caf-node-0"));
  ASSERT_TRUE(from2);
  caf::scoped_actor other{h->system(2)};
  // (A node's first interest frame can come before the registry lists it
  // here: that one was dropped as unknown too.)
  const auto unknown_before = h->stats(0)->bus.dropped("unknown_peer");
  std::vector<char> buf;
  caf::binary_serializer sink{h->system(2), buf};
  bus_forward spoof{"robust", "spoofed", "", true, {}};
  ASSERT_FALSE(sink(spoof));
  other->send(*from2, bus_peer_forward{"caf-node-1", std::string(buf.begin(), buf.end())});
  std::vector<char> ibuf;
  caf::binary_serializer isink{h->system(2), ibuf};
  bus_interest steal{{"robust"}, {""}};
  ASSERT_FALSE(isink(steal));
  other->send(*from2, bus_peer_frame{"caf-node-9", bus_frame_interest,
                                     std::string(ibuf.begin(), ibuf.end())});
  other->send(*from2, bus_publish{"robust", "injected", ""});
  other->send(*from2, bus_unsubscribe{1});
  other->send(*from2, bus_peers{});
  EXPECT_TRUE(eventually([&] {
    return h->stats(0)->bus.dropped("unknown_peer") == unknown_before + 2 &&
           h->stats(0)->bus.dropped("remote_local_only") == 3;
  })) << "unknown_peer " << h->stats(0)->bus.dropped("unknown_peer") << ", remote_local_only "
      << h->stats(0)->bus.dropped("remote_local_only");
  EXPECT_EQ(h->stats(0)->bus.peers.load(), 2) << "a fake bus_peers list changed the peers";
  ASSERT_TRUE(bus_publish_to(h->system(1), h->bus(1), bus_publish{"robust", "fine", ""}));
  EXPECT_EQ(zero->next()->payload, "fine") << "the node stopped serving";
}

}  // namespace
}  // namespace waggle::testing
