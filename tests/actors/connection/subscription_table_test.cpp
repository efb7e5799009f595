// The subscription table (actors/connection/subscription_table.hpp):
// generations, byte accounting against the connection's cap and the node's
// budget, live events before and after EOSE, and revocations ending exactly
// the subscriptions left with no authority. No actor.

#include "actors/connection/subscription_table.hpp"

#include <algorithm>

#include <gtest/gtest.h>

using namespace waggle;

namespace {

std::string hex_id(char c) { return std::string(64, c); }

event_ptr event_with_id(char c) {
  auto ev = std::make_shared<proto::event>();
  ev->id = hex_id(c);
  ev->raw = "{\"id\":\"" + ev->id + "\",\"kind\":1}";
  return ev;
}

std::vector<std::string> sorted(std::vector<std::string> v) {
  std::sort(v.begin(), v.end());
  return v;
}

const std::string pk1 = "pk1", pk2 = "pk2";

// A table with a checked community grant per subscription and the channel grants given.
subscription_table with_grants(
  const std::vector<std::pair<std::string, std::vector<channel_grant>>>& subs) {
  subscription_table t;
  for (auto& [id, grants] : subs) {
    t.add(id, t.next_generation());
    t.grant(id, std::vector<channel_grant>(grants), {true, true, {pk1}, {}});
  }
  return t;
}

// What the actor does with a revocation's answer: ends those subscriptions.
template <class F>
std::vector<std::string> ended_by(subscription_table& t, F revoke) {
  auto ended = revoke();
  for (auto& id : ended)
    t.remove(id);
  return sorted(ended);
}

}  // namespace

TEST(SubscriptionTable, OnlyTheCurrentGenerationOfAnIdIsCurrent) {
  subscription_table t;
  auto g1 = t.next_generation();
  auto g2 = t.next_generation();
  EXPECT_LT(g1, g2);  // tickets of reads share the numbering: never reused
  t.add("s", g1);
  EXPECT_TRUE(t.is_current("s", g1));
  EXPECT_FALSE(t.is_current("s", g2));
  EXPECT_FALSE(t.is_current("other", g1));
  // A REQ replacing the id: the old generation's replies are no-ops.
  t.remove("s");
  EXPECT_FALSE(t.is_current("s", g1));
  auto g3 = t.next_generation();
  t.add("s", g3);
  EXPECT_FALSE(t.is_current("s", g1));
  EXPECT_TRUE(t.is_current("s", g3));
  EXPECT_EQ(t.size(), 1u);
}

TEST(SubscriptionTable, ChargesTheConnectionCapBeforeTheNodeBudgetAndGivesBackOnRemove) {
  auto budget = std::make_shared<memory_budget>(10000);
  subscription_table t{1000, budget};
  t.add("a", t.next_generation());
  t.add("b", t.next_generation());
  EXPECT_EQ(t.charge("a", 600), subscription_charge::charged);
  EXPECT_EQ(t.charge("b", 401), subscription_charge::over_connection_cap);
  EXPECT_EQ(budget->used(), 600u);  // refused by the cap: the node's budget untouched
  EXPECT_EQ(t.charge("b", 400), subscription_charge::charged);
  EXPECT_EQ(t.bytes(), 1000u);
  EXPECT_EQ(t.find("b")->bytes, 400u);
  t.remove("a");
  EXPECT_EQ(t.bytes(), 400u);
  EXPECT_EQ(budget->used(), 400u);
  t.release_all();
  EXPECT_EQ(budget->used(), 0u);
}

TEST(SubscriptionTable, TheNodeBudgetRefusesWhatTheConnectionCapAllows) {
  auto budget = std::make_shared<memory_budget>(700);
  subscription_table t{0, budget};  // no cap of its own
  t.add("a", t.next_generation());
  EXPECT_EQ(t.charge("a", 600), subscription_charge::charged);
  EXPECT_EQ(t.charge("a", 200), subscription_charge::over_node_budget);
  EXPECT_EQ(t.find("a")->bytes, 600u);
  EXPECT_EQ(t.bytes(), 600u);
}

TEST(SubscriptionTable, LiveEventsWaitForEoseUpToTheBoundAndSkipWhatTheHistorySent) {
  subscription_table t;
  auto g = t.next_generation();
  t.add("s", g);
  subscription_table::remember_history(*t.find("s"), {event_with_id('b')->raw});
  EXPECT_EQ(t.on_live("s", g + 1, event_with_id('a'), 2), live_verdict::stale);
  EXPECT_EQ(t.on_live("gone", g, event_with_id('a'), 2), live_verdict::stale);
  EXPECT_EQ(t.on_live("s", g, event_with_id('a'), 2), live_verdict::held);
  EXPECT_EQ(t.on_live("s", g, event_with_id('b'), 2), live_verdict::held);
  EXPECT_EQ(t.on_live("s", g, event_with_id('c'), 2), live_verdict::overflow);
  // EOSE: what was held goes out, in order, except what the history carried.
  auto out = t.go_live("s");
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0]->id, hex_id('a'));
  EXPECT_TRUE(t.find("s")->pending.empty());
  EXPECT_EQ(t.on_live("s", g, event_with_id('c'), 2), live_verdict::send);
  EXPECT_EQ(t.on_live("s", g, event_with_id('b'), 2), live_verdict::sent);
}

TEST(SubscriptionTable, HistoryIdsOfEveryPageAreRemembered) {
  subscription sub;
  subscription_table::remember_history(sub, {event_with_id('e')->raw, event_with_id('c')->raw});
  subscription_table::remember_history(sub, {event_with_id('d')->raw, "not our rendering"});
  EXPECT_TRUE(std::is_sorted(sub.history_ids.begin(), sub.history_ids.end()));
  EXPECT_EQ(sub.history_ids.size(), 3u);
  for (char c : {'c', 'd', 'e'})
    EXPECT_TRUE(sub.sent_in_history(hex_id(c))) << c;
  EXPECT_FALSE(sub.sent_in_history(hex_id('f')));
}

TEST(SubscriptionTable, AMemberRemovedEndsOnlyTheSubscriptionsThatRestedOnHim) {
  auto t = with_grants({
    {"open_and_member", {{"x", true, {pk1}}}},
    {"member_only", {{"x", false, {pk1}}}},
    {"two_members", {{"x", false, {pk1, pk2}}}},
    {"other_channel", {{"y", false, {pk1}}}},
    {"no_channel", {}},
  });
  EXPECT_EQ(ended_by(t, [&] { return t.revoke_channel({0, "x", pk1, false}); }),
            (std::vector<std::string>{"member_only"}));
  // The grants were narrowed: the channel going private now ends the open one.
  EXPECT_EQ(ended_by(t, [&] { return t.revoke_channel({0, "x", "", false}); }),
            (std::vector<std::string>{"open_and_member"}));
  EXPECT_EQ(t.size(), 3u);
  EXPECT_EQ(t.find("two_members")->grants.at("x").members, (std::vector<std::string>{pk2}));
}

TEST(SubscriptionTable, ADeletedChannelEndsEverySubscriptionNamingIt) {
  auto t = with_grants({
    {"open", {{"x", true, {}}}},
    {"member", {{"x", false, {pk1}}}},
    {"elsewhere", {{"y", true, {pk1}}}},
  });
  EXPECT_EQ(ended_by(t, [&] { return t.revoke_channel({0, "x", "", true}); }),
            (std::vector<std::string>{"member", "open"}));
  EXPECT_TRUE(t.contains("elsewhere"));
}

TEST(SubscriptionTable, ACommunityRevocationEndsOnlyCheckedGrantsLeftAllowingNoOne) {
  subscription_table t;
  for (auto id : {"member", "guest", "member_and_guest", "unchecked", "two_members"})
    t.add(id, t.next_generation());
  t.grant("member", {}, {true, false, {pk1}, {}});
  t.grant("guest", {}, {true, true, {}, {pk1}});
  t.grant("member_and_guest", {}, {true, true, {pk1}, {pk2}});
  t.grant("unchecked", {}, {false, false, {}, {}});  // its history re-check will judge it
  t.grant("two_members", {}, {true, false, {pk1, pk2}, {}});
  EXPECT_EQ(ended_by(t, [&] { return t.revoke_access(pk1); }),
            (std::vector<std::string>{"guest", "member"}));
  // The community closes: guests no longer read, members do.
  EXPECT_EQ(ended_by(t, [&] { return t.revoke_access(""); }),
            (std::vector<std::string>{"member_and_guest"}));
  EXPECT_EQ(t.size(), 2u);
  EXPECT_EQ(t.find("two_members")->community.members, (std::vector<std::string>{pk2}));
}

TEST(SubscriptionTable, TheHistoryRecheckKeepsOnlyWhatBothChecksGranted) {
  subscription_table t;
  t.add("s", t.next_generation());
  t.grant("s", {{"x", true, {pk1, pk2}}}, {true, true, {pk1, pk2}, {}});
  EXPECT_TRUE(t.recheck("s", {{"x", false, {pk2}}}, {true, false, {pk2}, {}}).ok());
  auto& sub = *t.find("s");
  EXPECT_FALSE(sub.grants.at("x").open);
  EXPECT_EQ(sub.grants.at("x").members, (std::vector<std::string>{pk2}));
  EXPECT_EQ(sub.community.members, (std::vector<std::string>{pk2}));
  // A reply that carries no community facts narrows nothing there.
  EXPECT_TRUE(t.recheck("s", {}, {}).ok());
  auto lost = t.recheck("s", {{"x", false, {}}}, {});
  EXPECT_EQ(lost.code, ec::restricted);
  EXPECT_EQ(lost.reason, "no longer allowed to read channel x");
}

TEST(SubscriptionTable, TheHistoryRecheckEndsASubscriptionTheCommunityNoLongerAllows) {
  subscription_table t;
  t.add("s", t.next_generation());
  t.grant("s", {}, {true, true, {}, {pk1}});
  auto lost = t.recheck("s", {}, {true, true, {}, {}});
  EXPECT_EQ(lost.code, ec::restricted);
  EXPECT_EQ(lost.reason, "not a member of this community");
}
