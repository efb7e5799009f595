// The fanout hub's subscription index (actors/fanout/hub_actor.hpp), on its
// own: which subscriptions an event reaches, per community, per channel, and
// how subscriptions are replaced and removed. Actors only lend their handles
// (connections are told apart by address); no message is ever sent.

#include <algorithm>

#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <gtest/gtest.h>

#include "actors/fanout/hub_actor.hpp"
#include "tests/actors/actor_fixture.hpp"
#include "tests/support/event_builder.hpp"

namespace waggle {
namespace {

proto::filter kinds(std::vector<int32_t> k) {
  proto::filter f;
  f.kinds = std::move(k);
  return f;
}

struct SubscriptionIndexTest : ::testing::Test {
  caf::actor_system_config cfg;
  caf::actor_system sys{cfg};
  connection_actor a = sys.spawn(testing::stand_in_connection, nullptr);
  connection_actor b = sys.spawn(testing::stand_in_connection, nullptr);
  subscription_index index;
  std::string alice = proto::pubkey_of(test::secret(1));

  ~SubscriptionIndexTest() override {
    caf::anon_send_exit(a, caf::exit_reason::user_shutdown);
    caf::anon_send_exit(b, caf::exit_reason::user_shutdown);
  }

  proto::event note(int32_t kind = 1, std::vector<proto::tag> tags = {}) {
    return test::event_builder{test::secret(1)}.kind(kind).tags(std::move(tags)).sign();
  }
  const subscription_index::match* match_of(const std::vector<subscription_index::match>& ms,
                                            const connection_actor& conn) {
    auto i = std::find_if(ms.begin(), ms.end(), [&](auto& m) { return m.conn == conn; });
    return i == ms.end() ? nullptr : &*i;
  }
};

// find() keeps its working memory across calls (the hub calls it for
// every event): nothing of one call may leak into the next.
TEST_F(SubscriptionIndexTest, RepeatedFindsAreIndependent) {
  index.add(a, 1, "notes", 1, {kinds({1})});
  index.add(b, 1, "reactions", 1, {kinds({7})});
  for (int round = 0; round < 3; ++round) {
    auto notes = index.find(1, note(1));
    ASSERT_EQ(notes.size(), 1u);
    EXPECT_EQ(notes[0].conn, a);
    EXPECT_EQ(notes[0].sub_ids, std::vector<std::string>{"notes"});
    auto reactions = index.find(1, note(7));
    ASSERT_EQ(reactions.size(), 1u);
    EXPECT_EQ(reactions[0].conn, b);
    EXPECT_EQ(reactions[0].sub_ids, std::vector<std::string>{"reactions"});
    EXPECT_TRUE(index.find(1, note(3)).empty());
  }
}

TEST_F(SubscriptionIndexTest, OneMatchPerConnectionNamingEverySubscriptionItMatched) {
  index.add(a, 1, "notes", 1, {kinds({1})});
  proto::filter by_author;
  by_author.authors = std::vector<std::string>{alice};
  index.add(a, 1, "mine", 2, {by_author});
  index.add(a, 1, "reactions", 3, {kinds({7})});
  index.add(b, 1, "all-notes", 1, {kinds({1, 7})});
  auto found = index.find(1, note(1));
  ASSERT_EQ(found.size(), 2u);
  auto* ma = match_of(found, a);
  ASSERT_NE(ma, nullptr);
  auto subs = ma->sub_ids;
  std::sort(subs.begin(), subs.end());
  EXPECT_EQ(subs, (std::vector<std::string>{"mine", "notes"}));
  ASSERT_EQ(ma->generations.size(), ma->sub_ids.size());
  for (size_t k = 0; k < ma->sub_ids.size(); ++k)
    EXPECT_EQ(ma->generations[k], ma->sub_ids[k] == "notes" ? 1u : 2u);
  ASSERT_NE(match_of(found, b), nullptr);
  EXPECT_EQ(match_of(found, b)->sub_ids, (std::vector<std::string>{"all-notes"}));
}

TEST_F(SubscriptionIndexTest, CommunitiesNeverSeeEachOthersEvents) {
  index.add(a, 1, "s", 1, {kinds({1})});
  index.add(b, 2, "s", 1, {proto::filter{}});  // everything, but in community 2
  auto found = index.find(1, note());
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0].conn, a);
  EXPECT_TRUE(index.find(3, note()).empty());
  EXPECT_EQ(index.connections_in(2), (std::vector<connection_actor>{b}));
}

TEST_F(SubscriptionIndexTest, ChannelEventsReachOnlyFiltersThatNameTheChannel) {
  index.add(a, 1, "bare", 1, {kinds({9})});
  proto::filter general = kinds({9});
  general.tags['h'] = {"general"};
  index.add(b, 1, "general", 1, {general});
  auto found = index.find(1, note(9, {{"h", "general"}}));
  ASSERT_EQ(found.size(), 1u) << "the bare filter was never access-checked for the channel";
  EXPECT_EQ(found[0].conn, b);
  EXPECT_TRUE(index.find(1, note(9, {{"h", "random"}})).empty());
  EXPECT_EQ(index.find(1, note(9)).size(), 1u);  // outside channels the bare filter matches
}

TEST_F(SubscriptionIndexTest, ReAddingAnIdReplacesAndRemovalEndsIt) {
  index.add(a, 1, "s", 1, {kinds({1})});
  index.add(a, 1, "s", 2, {kinds({7})});
  EXPECT_EQ(index.size(), 1u);
  EXPECT_TRUE(index.find(1, note(1)).empty());
  auto found = index.find(1, note(7));
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0].generations, (std::vector<uint64_t>{2}));
  index.remove(a.address(), "s");
  EXPECT_EQ(index.size(), 0u);
  EXPECT_TRUE(index.find(1, note(7)).empty());
}

TEST_F(SubscriptionIndexTest, RemovingAConnectionDropsAllItsSubscriptions) {
  index.add(a, 1, "x", 1, {kinds({1})});
  index.add(a, 1, "y", 1, {proto::filter{}});
  index.add(b, 1, "x", 1, {kinds({1})});
  index.remove_connection(a.address());
  EXPECT_EQ(index.size(), 1u);
  auto found = index.find(1, note());
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0].conn, b);
  EXPECT_EQ(index.connections_in(1), (std::vector<connection_actor>{b}));
}

// NIP-50 search is one-shot: a search filter is filed under no key, so no
// live event ever reaches it, even one with every word and field it names;
// the REQ's other filters stay live.
TEST_F(SubscriptionIndexTest, SearchFiltersAreNeverLive) {
  proto::filter search = kinds({1});
  search.search = "bees";
  proto::filter bare;
  bare.search = "bees";
  index.add(a, 1, "s", 1, {search, bare});
  EXPECT_EQ(index.size(), 1u);
  EXPECT_EQ(index.keys(), 0u);
  auto ev = test::event_builder{test::secret(1)}.kind(1).content("bees").sign();
  EXPECT_TRUE(index.find(1, ev).empty());
  index.add(b, 1, "mixed", 1, {search, kinds({7})});
  EXPECT_EQ(index.keys(), 1u);
  EXPECT_TRUE(index.find(1, ev).empty());
  EXPECT_EQ(index.find(1, note(7)).size(), 1u);
}

}  // namespace
}  // namespace waggle
