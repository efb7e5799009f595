// The hub in a cluster (docs/scaling.md): a local commit reaches it twice,
// from the node's writer and from the cluster tail's read of the database,
// in either order, and is fanned out once; the relay hears of each local
// commit and ephemeral event, and of nothing the tail brought. Alone (no
// relay attached) the hub remembers nothing. Under test_coordinator.

#include <map>
#include <optional>

#include "actors/fanout/cluster_relay.hpp"
#include "actors/fanout/hub_actor.hpp"
#include "actors/fanout/recent_events.hpp"
#include "tests/actors/actor_fixture.hpp"

using namespace waggle;
using namespace waggle::testing;

namespace {

constexpr int64_t now = 1'700'000'000;

event_ptr event_with(std::string content) {
  proto::event ev;
  ev.kind = 1;
  ev.created_at = now;
  ev.content = std::move(content);
  proto::sign(ev, std::string(64, '1'));
  return std::make_shared<const proto::event>(std::move(ev));
}

struct heard {
  std::vector<std::string> live;        // contents, in order
  uint32_t commits = 0;                 // events the relay was told were committed here
  std::vector<std::string> ephemeral;   // contents the relay was asked to carry
  std::vector<std::string> routed;      // channels whose rosters it was asked to route
};

cluster_relay_actor::behavior_type stand_in_relay(cluster_relay_actor::pointer,
                                                  std::shared_ptr<heard> log) {
  return {
    [](const bus_message&) {},
    [](const bus_lagged&) {},
    [log](const cluster_local_commit& m) { log->commits += m.events; },
    [log](const cluster_local_ephemeral& m) { log->ephemeral.push_back(m.item.ev->content); },
    [](const cluster_relay_tick&) {},
    [](const cluster_barrier&) { return cluster_barrier_done{}; },
    [log](const roster_route& r) {
      log->routed.push_back(r.channel);
      return roster_routed{true};
    },
  };
}

class hub_cluster_test : public actor_test {
 protected:
  std::shared_ptr<heard> log = std::make_shared<heard>();
  hub_actor hub;
  cluster_relay_actor relay;

  void SetUp() override {
    hub = spawn(clustered_hub_actor_impl, test_env(now));
    auto conn = spawn(stand_in_connection,
                      [l = log](const live_event& ev) { l->live.push_back(ev.ev->content); });
    caf::anon_send(hub, hub_subscribe{conn, 1, "s", 1, {proto::filter{}}});
    relay = spawn(stand_in_relay, log);
    run();
  }
};

TEST_F(hub_cluster_test, a_local_commit_read_back_by_the_tail_is_fanned_out_once) {
  caf::anon_send(hub, cluster_attach{relay});
  auto a = event_with("a"), b = event_with("b"), c = event_with("c");
  caf::anon_send(hub, committed_events{{{1, a}, {1, b}}});
  run();
  // The tail reads both back, and c, which another node committed.
  caf::anon_send(hub, cluster_committed{{{1, a}, {1, b}, {1, c}}});
  run();
  EXPECT_EQ(log->live, (std::vector<std::string>{"a", "b", "c"}));
  EXPECT_EQ(log->commits, 2u) << "the relay rings for local commits only";
}

TEST_F(hub_cluster_test, the_tail_first_then_the_writer_is_fanned_out_once) {
  caf::anon_send(hub, cluster_attach{relay});
  auto a = event_with("a");
  caf::anon_send(hub, cluster_committed{{{1, a}}});
  caf::anon_send(hub, committed_events{{{1, a}}});
  run();
  EXPECT_EQ(log->live, (std::vector<std::string>{"a"}));
  EXPECT_EQ(log->commits, 0u) << "nothing new to ring for: the tail brought it";
}

TEST_F(hub_cluster_test, the_same_id_in_another_community_is_another_event) {
  caf::anon_send(hub, cluster_attach{relay});
  auto a = event_with("a");
  caf::anon_send(hub, committed_events{{{1, a}}});
  caf::anon_send(hub, cluster_committed{{{2, a}}});
  run();
  EXPECT_EQ(log->live, (std::vector<std::string>{"a"})) << "community 2 has no subscriber";
  // ...but it was not taken for community 1's copy: a later copy of
  // community 2's is the duplicate.
  caf::anon_send(hub, committed_events{{{2, a}}});
  run();
  EXPECT_EQ(log->commits, 1u);
}

// Ephemeral events are not remembered: each comes once (the origin's relay
// ignores its own), and a flood of them must not push committed events out
// of the window.
TEST_F(hub_cluster_test, ephemeral_events_go_to_the_relay_and_are_not_remembered) {
  caf::anon_send(hub, cluster_attach{relay});
  auto mine = event_with("mine"), theirs = event_with("theirs");
  caf::anon_send(hub, ephemeral_publish{{1, mine}});
  caf::anon_send(hub, cluster_ephemeral{{1, theirs}});
  run();
  EXPECT_EQ(log->live, (std::vector<std::string>{"mine", "theirs"}));
  EXPECT_EQ(log->ephemeral, (std::vector<std::string>{"mine"})) << "only local ones travel";
  // Had they been remembered, the committed copy of the same id would drop.
  caf::anon_send(hub, committed_events{{{1, theirs}}});
  run();
  EXPECT_EQ(log->live.size(), 3u);
}

TEST_F(hub_cluster_test, before_its_relay_attaches_a_clustered_hub_already_remembers) {
  auto a = event_with("a");
  caf::anon_send(hub, committed_events{{{1, a}}});
  caf::anon_send(hub, cluster_committed{{{1, a}}});
  run();
  EXPECT_EQ(log->live, (std::vector<std::string>{"a"}));
}

TEST_F(hub_cluster_test, a_barrier_without_a_relay_fails_closed_in_a_cluster) {
  auto answer = std::make_shared<std::optional<cluster_barrier_done>>();
  spawn([hub = hub, answer](caf::event_based_actor* self) {
    self->request(hub, caf::infinite, cluster_barrier{})
      .then([answer](cluster_barrier_done& d) { *answer = d; });
  });
  run();
  ASSERT_TRUE(answer->has_value());
  EXPECT_EQ((*answer)->unconfirmed.size(), 1u) << "no relay: nobody was asked, nothing confirmed";
}

TEST_F(hub_cluster_test, a_roster_goes_to_its_owner_through_the_relay_once_attached) {
  auto ask = [this](std::string channel) {
    auto answer = std::make_shared<std::optional<roster_routed>>();
    spawn([hub = hub, answer, channel](caf::event_based_actor* self) {
      self->request(hub, caf::infinite, roster_route{1, channel})
        .then([answer](roster_routed& r) { *answer = r; });
    });
    run();
    return *answer;
  };
  auto before = ask("general");
  ASSERT_TRUE(before.has_value());
  EXPECT_FALSE(before->elsewhere) << "no relay yet: this node publishes";
  EXPECT_TRUE(log->routed.empty());
  caf::anon_send(hub, cluster_attach{relay});
  run();
  auto after = ask("general");
  ASSERT_TRUE(after.has_value());
  EXPECT_TRUE(after->elsewhere) << "the relay's word is passed on";
  EXPECT_EQ(log->routed, (std::vector<std::string>{"general"}));
}

TEST(roster_owner, every_node_picks_the_same_owner_and_a_leaver_moves_only_its_own) {
  std::vector<std::string> three{"a:7777", "b:7777", "c:7777"};
  std::vector<std::string> shuffled{"c:7777", "a:7777", "b:7777"};
  std::map<std::string, int> wins;
  int moved = 0;
  for (int i = 0; i < 3000; ++i) {
    auto channel = "ch" + std::to_string(i);
    auto owner = roster_owner(three, 5, channel);
    EXPECT_EQ(owner, roster_owner(shuffled, 5, channel)) << "the order of the registry matters not";
    ++wins[owner];
    std::vector<std::string> two;
    for (auto& n : three)
      if (n != "b:7777")
        two.push_back(n);
    auto without_b = roster_owner(two, 5, channel);
    if (owner != "b:7777")
      EXPECT_EQ(without_b, owner) << "a channel b did not own stays where it was";
    else
      ++moved;
  }
  for (auto& n : three)
    EXPECT_GT(wins[n], 800) << n << " owns about a third";
  EXPECT_EQ(moved, wins["b:7777"]);
  EXPECT_EQ(roster_owner({}, 5, "x"), "");
  int differ = 0;
  for (int i = 0; i < 300; ++i)
    differ += roster_owner(three, 5, std::to_string(i)) != roster_owner(three, 6, std::to_string(i));
  EXPECT_GT(differ, 100) << "the community is part of the key";
}

TEST_F(hub_cluster_test, alone_the_hub_remembers_nothing) {
  hub = spawn(hub_actor_impl, test_env(now));
  auto conn = spawn(stand_in_connection,
                    [l = log](const live_event& ev) { l->live.push_back(ev.ev->content); });
  caf::anon_send(hub, hub_subscribe{conn, 1, "s", 1, {proto::filter{}}});
  run();
  auto a = event_with("a");
  caf::anon_send(hub, committed_events{{{1, a}}});
  caf::anon_send(hub, committed_events{{{1, a}}});
  run();
  EXPECT_EQ(log->live, (std::vector<std::string>{"a", "a"}))
    << "without a cluster the hub fans out what it is given, as before";
  EXPECT_EQ(log->commits, 0u);
}

TEST(recent_events, forgets_the_oldest_beyond_its_capacity) {
  recent_events r(2);
  auto id = [](char c) { return std::string(64, c); };
  EXPECT_TRUE(r.first(1, id('a')));
  EXPECT_FALSE(r.first(1, id('a')));
  EXPECT_TRUE(r.first(1, id('b')));
  EXPECT_TRUE(r.first(1, id('c')));  // 'a' falls out
  EXPECT_TRUE(r.first(1, id('a')));
  EXPECT_FALSE(r.first(1, id('c')));
  EXPECT_EQ(r.size(), 2u);
}

}  // namespace
