// NIP-77 isolation (docs/negentropy.md, "What a session reconciles"): a
// negentropy session reconciles exactly what a REQ with its filter could
// read. Over alpha's Host nothing of beta's comes back, not even as an id in
// an id list; a private channel the caller may not read is refused with the
// same NEG-ERR as a channel that does not exist, before any item is read, so
// neither its ids, nor its size, nor (beyond the one access query both take)
// its existence shows.

#include <set>

#include "messages/proto/negentropy.hpp"
#include "tests/e2e/node_fixture.hpp"

namespace waggle::e2e {
namespace {

namespace neg = proto::negentropy;

class negentropy_isolation : public node_e2e {
 protected:
  struct outcome {
    std::string error;  // the NEG-ERR's reason, if refused
    std::set<std::string> need;  // hex ids the relay holds and the (empty) client lacks
  };
  // Reconciles an empty set against `filter` on `c`: what comes back is
  // every id the relay would let this client read.
  outcome reconcile_empty(gateway::ws_client& c, const std::string& sub, const std::string& filter) {
    outcome out;
    neg::storage empty;
    empty.seal();
    neg::reconciler client(empty, 30000);
    c.send_text("[\"NEG-OPEN\",\"" + sub + "\"," + filter + ",\"" + neg::to_hex(client.initiate()) +
                "\"]");
    while (auto f = c.read_text(10s)) {
      auto d = parse(*f);
      if (d.Size() < 3 || std::string(d[1].GetString()) != sub)
        continue;
      if (std::string(d[0].GetString()) == "NEG-ERR") {
        out.error = d[2].GetString();
        return out;
      }
      std::string answer;
      EXPECT_TRUE(neg::from_hex(d[2].GetString(), answer));
      auto next = client.reconcile(answer);
      EXPECT_EQ(next.error, "");
      for (auto& id : next.need)
        out.need.insert(neg::to_hex(id));
      if (next.message.empty())
        return out;
      c.send_text("[\"NEG-MSG\",\"" + sub + "\",\"" + neg::to_hex(next.message) + "\"]");
    }
    out.error = "(timeout)";
    return out;
  }
  const std::string carol = pgtest::secret(13);
};

TEST_F(negentropy_isolation, over_one_hosts_connection_nothing_of_the_other_community_shows) {
  auto beta = login("beta.test", carol);
  auto theirs = signed_event(carol, 1, "beta's own note");
  ASSERT_NE(publish(*beta, theirs).find(",true,"), std::string::npos);
  auto alpha = login("alpha.test", bob);
  auto ours = signed_event(bob, 1, "alpha's own note");
  ASSERT_NE(publish(*alpha, ours).find(",true,"), std::string::npos);

  auto on_alpha = reconcile_empty(*alpha, "a", "{}");
  ASSERT_EQ(on_alpha.error, "");
  EXPECT_TRUE(on_alpha.need.contains(ours.id));
  EXPECT_FALSE(on_alpha.need.contains(theirs.id)) << "beta's event reached alpha's set";
  // Even asked for by id or author, alpha's set has none of beta's.
  auto by_id = reconcile_empty(*alpha, "b", "{\"ids\":[\"" + theirs.id + "\"]}");
  EXPECT_EQ(by_id.error, "");
  EXPECT_TRUE(by_id.need.empty());
  auto by_author = reconcile_empty(*alpha, "c", "{\"authors\":[\"" + theirs.pubkey + "\"]}");
  EXPECT_TRUE(by_author.need.empty());
  // The control: on beta's Host the same session finds it.
  auto on_beta = reconcile_empty(*beta, "d", "{\"ids\":[\"" + theirs.id + "\"]}");
  EXPECT_EQ(on_beta.need, std::set<std::string>{theirs.id});
  // And a REQ agrees with the set, id for id, on alpha.
  auto req = history(*alpha, "r", "{}");
  EXPECT_EQ(std::set<std::string>(req.begin(), req.end()), on_alpha.need);
}

TEST_F(negentropy_isolation, a_private_channel_is_refused_as_a_channel_that_does_not_exist) {
  auto a = login("alpha.test", alice);
  auto create = signed_event(alice, 9007, "", {{"h", "neg-secret"}, {"private"}});
  ASSERT_EQ(publish(*a, create), proto::render_ok(create.id, true, ""));
  auto post = signed_event(alice, 9, "the plan", {{"h", "neg-secret"}});
  ASSERT_EQ(publish(*a, post), proto::render_ok(post.id, true, ""));

  auto b = login("alpha.test", bob);
  auto secret = reconcile_empty(*b, "s", R"({"#h":["neg-secret"]})");
  auto missing = reconcile_empty(*b, "m", R"({"#h":["no-such-channel"]})");
  EXPECT_EQ(secret.error.rfind("restricted:", 0), 0u) << secret.error;
  // The same words but for the channel's name, which the caller sent.
  auto without = [](std::string reason, const std::string& name) {
    auto at = reason.find(" (" + name + ")");
    return at == std::string::npos ? reason : reason.erase(at);
  };
  EXPECT_EQ(without(secret.error, "neg-secret"), without(missing.error, "no-such-channel"))
    << "the refusal tells a private channel from none";
  EXPECT_TRUE(secret.need.empty());
  // Without #h a channel's events are outside every set, as outside every REQ.
  auto all = reconcile_empty(*b, "all", "{}");
  EXPECT_FALSE(all.need.contains(post.id));
  EXPECT_FALSE(all.need.contains(create.id));
  // The member's session holds them.
  auto member = reconcile_empty(*a, "s", R"({"#h":["neg-secret"]})");
  EXPECT_EQ(member.error, "");
  EXPECT_TRUE(member.need.contains(post.id));
}

}  // namespace
}  // namespace waggle::e2e
