// bus_table (actors/bus/bus_table.hpp): who receives one bus message on a
// node, queue groups taken in turn, and removal by id and by subscriber.

#include <gtest/gtest.h>

#include <caf/all.hpp>

#include "actors/bus/bus_table.hpp"
#include "messages/register_types.hpp"

namespace waggle {
namespace {

struct bus_table_test : ::testing::Test {
  caf::actor_system_config cfg;
  std::unique_ptr<caf::actor_system> sys;
  bus_table table;

  void SetUp() override {
    register_types(cfg);
    // The subscribers only need to exist: no message is ever sent to them.
    cfg.set("scheduler.max-threads", 1);
    sys = std::make_unique<caf::actor_system>(cfg);
  }

  bus_subscriber_actor subscriber() {
    return sys->spawn([]() -> bus_subscriber_actor::behavior_type {
      return {[](bus_message&) {}, [](bus_lagged&) {}};
    });
  }
};

TEST_F(bus_table_test, EveryPlainSubscriberAndOneMemberPerGroupReceive) {
  auto a = subscriber(), b = subscriber(), g1 = subscriber(), g2 = subscriber(),
       h = subscriber();
  table.add("chat", "", a);
  table.add("chat", "", b);
  table.add("chat", "workers", g1);
  table.add("chat", "workers", g2);
  table.add("chat", "audit", h);
  table.add("other", "", subscriber());

  std::map<caf::actor_addr, int> got;
  for (int i = 0; i < 4; ++i)
    for (auto& r : table.recipients("chat"))
      ++got[r.address()];
  EXPECT_EQ(got[a.address()], 4);
  EXPECT_EQ(got[b.address()], 4);
  EXPECT_EQ(got[g1.address()], 2) << "the workers group takes its members in turn";
  EXPECT_EQ(got[g2.address()], 2);
  EXPECT_EQ(got[h.address()], 4);
  EXPECT_EQ(got.size(), 5u) << "nothing for another subject's subscriber";
  EXPECT_TRUE(table.recipients("nobody").empty());
}

TEST_F(bus_table_test, SubjectsAreMatchedExactly) {
  auto a = subscriber();
  table.add("chat", "", a);
  EXPECT_TRUE(table.recipients("chat ").empty());
  EXPECT_TRUE(table.recipients("cha").empty());
  EXPECT_TRUE(table.recipients("CHAT").empty());
  EXPECT_EQ(table.recipients("chat").size(), 1u);
}

TEST_F(bus_table_test, RemovalByIdAndBySubscriberForgetsEmptySubjectsAndGroups) {
  auto a = subscriber(), b = subscriber();
  auto a1 = table.add("x", "", a);
  auto a2 = table.add("y", "g", a);
  auto b1 = table.add("y", "g", b);
  EXPECT_NE(a1, a2);
  EXPECT_EQ(table.subjects(), (std::vector<std::string>{"x", "y"}));

  ASSERT_TRUE(table.remove(a1));
  EXPECT_FALSE(table.remove(a1)) << "an id is removed once";
  EXPECT_FALSE(table.wants("x"));
  EXPECT_TRUE(table.holds(a.address()));

  auto gone = table.remove_subscriber(a.address());
  ASSERT_EQ(gone.size(), 1u);
  EXPECT_EQ(gone[0].id, a2);
  EXPECT_FALSE(table.holds(a.address()));
  EXPECT_EQ(table.next_member("y", "g"), b) << "the group's turn skips a removed member";
  EXPECT_EQ(table.next_member("y", "g"), b);
  table.remove(b1);
  EXPECT_TRUE(table.groups("y").empty());
  EXPECT_EQ(table.size(), 0u);
  EXPECT_FALSE(table.next_member("y", "g"));
  auto again = table.add("x", "", a);
  EXPECT_GT(again, b1) << "ids are never reused";
}

TEST_F(bus_table_test, AcceptLeavesSubscriptionsOutAndKeepsTheTurn) {
  auto a = subscriber(), b = subscriber(), c = subscriber();
  auto ia = table.add("jobs", "", a);
  table.add("jobs", "", b);
  auto m1 = table.add("jobs", "w", a);
  auto m2 = table.add("jobs", "w", b);
  table.add("jobs", "w", c);
  auto not_a = [&](uint64_t id) { return id != ia && id != m1; };
  auto plain = table.plain("jobs", not_a);
  ASSERT_EQ(plain.size(), 1u);
  EXPECT_EQ(plain[0], b);
  // The turn skips the member left out, and goes on after the one taken.
  EXPECT_EQ(table.next_member("jobs", "w", not_a), b);
  EXPECT_EQ(table.next_member("jobs", "w", not_a), c);
  EXPECT_EQ(table.next_member("jobs", "w", not_a), b);
  EXPECT_EQ(table.next_member("jobs", "w", [&](uint64_t id) { return id == m2; }), b);
  EXPECT_FALSE(table.next_member("jobs", "w", [](uint64_t) { return false; }));
  EXPECT_FALSE(table.next_member("jobs", "none", [](uint64_t) { return true; }));
}

}  // namespace
}  // namespace waggle
