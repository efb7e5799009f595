// Channels (NIP-29 groups) end to end through real sockets: access control on
// REQ and live delivery, removal ending a live subscription, tenant isolation
// of channel events, and the relay-signed roster.

#include "tests/e2e/node_fixture.hpp"

using namespace waggle;
using namespace std::chrono_literals;

namespace {

using namespace waggle::e2e;

class channels_e2e : public node_e2e {
 protected:
  // Sends a NIP-29 command and expects it accepted.
  void command(gateway::ws_client& c, const std::string& sk, int32_t kind,
               std::vector<proto::tag> tags) {
    auto ev = signed_event(sk, kind, "", std::move(tags));
    auto ok = publish(c, ev);
    ASSERT_EQ(ok, proto::render_ok(ev.id, true, "")) << "kind " << kind;
  }
  // The next frame within `within` that is not a frame of another sub.
  std::optional<std::string> next_frame_of(gateway::ws_client& c, const std::string& sub,
                                           std::chrono::milliseconds within) {
    auto until = std::chrono::steady_clock::now() + within;
    while (std::chrono::steady_clock::now() < until) {
      auto f = c.read_text(std::chrono::duration_cast<std::chrono::milliseconds>(
        until - std::chrono::steady_clock::now()));
      if (!f)
        return std::nullopt;
      if (f->find("\"" + sub + "\"") != std::string::npos)
        return f;
    }
    return std::nullopt;
  }
  const std::string carol = pgtest::secret(13);
  std::string pk(const std::string& sk) { return proto::pubkey_of(sk); }
};

TEST_F(channels_e2e, a_non_member_is_refused_a_private_channel_and_receives_nothing_live) {
  auto a = login("alpha.test", alice);
  command(*a, alice, 9007, {{"h", "secret-plans"}, {"private"}});
  auto b = login("alpha.test", bob);
  auto refused = history(*b, "s", R"({"#h":["secret-plans"]})");
  ASSERT_EQ(refused.size(), 1u);
  EXPECT_EQ(refused[0].rfind("CLOSED:restricted:", 0), 0u) << refused[0];
  // Bob's global subscription must not see channel events either.
  EXPECT_EQ(history(*b, "all", R"({"kinds":[9]})"), std::vector<std::string>{});
  auto post = signed_event(alice, 9, "the plan", {{"h", "secret-plans"}});
  EXPECT_EQ(publish(*a, post), proto::render_ok(post.id, true, ""));
  EXPECT_FALSE(b->read_text(300ms).has_value());
  // Nor can he post there.
  auto intrusion = signed_event(bob, 9, "let me in", {{"h", "secret-plans"}});
  auto ok = publish(*b, intrusion);
  EXPECT_NE(ok.find(",false,\"restricted:"), std::string::npos) << ok;
}

TEST_F(channels_e2e, removing_a_member_ends_their_live_subscription_at_once) {
  auto a = login("alpha.test", alice);
  command(*a, alice, 9007, {{"h", "ops"}, {"private"}});
  command(*a, alice, 9000, {{"h", "ops"}, {"p", pk(bob), "member"}});
  auto b = login("alpha.test", bob);
  EXPECT_EQ(history(*b, "ops", R"({"kinds":[9],"#h":["ops"]})"), std::vector<std::string>{});
  auto first = signed_event(alice, 9, "welcome", {{"h", "ops"}});
  EXPECT_EQ(publish(*a, first), proto::render_ok(first.id, true, ""));
  EXPECT_EQ(next_frame_of(*b, "ops", 5s).value_or(""), proto::render_event("ops", first.raw));

  command(*a, alice, 9001, {{"h", "ops"}, {"p", pk(bob)}});
  auto closed = next_frame_of(*b, "ops", 5s);
  ASSERT_TRUE(closed.has_value());
  EXPECT_EQ(closed->rfind("[\"CLOSED\",\"ops\",\"restricted:", 0), 0u) << *closed;
  auto after = signed_event(alice, 9, "bob is gone", {{"h", "ops"}});
  EXPECT_EQ(publish(*a, after), proto::render_ok(after.id, true, ""));
  EXPECT_FALSE(b->read_text(300ms).has_value());
  // And a new REQ is refused.
  auto again = history(*b, "ops2", R"({"#h":["ops"]})");
  ASSERT_EQ(again.size(), 1u);
  EXPECT_EQ(again[0].rfind("CLOSED:restricted:", 0), 0u) << again[0];
}

TEST_F(channels_e2e, open_channels_are_readable_by_all_and_writable_by_members) {
  auto a = login("alpha.test", alice);
  command(*a, alice, 9007, {{"h", "lobby"}, {"name", "Lobby"}});
  auto hello = signed_event(alice, 9, "hello all", {{"h", "lobby"}});
  EXPECT_EQ(publish(*a, hello), proto::render_ok(hello.id, true, ""));
  auto c = login("alpha.test", carol);
  EXPECT_EQ(history(*c, "l", R"({"#h":["lobby"]})").size(), 2u);  // the 9007 and the post
  auto early = signed_event(carol, 9, "hi", {{"h", "lobby"}});
  auto refused = publish(*c, early);
  EXPECT_NE(refused.find(",false,\"restricted:"), std::string::npos) << refused;
  command(*c, carol, 9021, {{"h", "lobby"}});
  auto hi = signed_event(carol, 9, "hi, joined", {{"h", "lobby"}});
  EXPECT_EQ(publish(*c, hi), proto::render_ok(hi.id, true, ""));
}

TEST_F(channels_e2e, channel_events_never_cross_communities) {
  auto a = login("alpha.test", alice);
  command(*a, alice, 9007, {{"h", "general"}});
  auto b = login("beta.test", bob);
  command(*b, bob, 9007, {{"h", "general"}});  // same id, other community
  // Bob subscribes to beta's "general" and must see only beta's events.
  auto beta_history = history(*b, "g", R"({"kinds":[9],"#h":["general"]})");
  EXPECT_EQ(beta_history, std::vector<std::string>{});
  auto alpha_post = signed_event(alice, 9, "alpha only", {{"h", "general"}});
  EXPECT_EQ(publish(*a, alpha_post), proto::render_ok(alpha_post.id, true, ""));
  EXPECT_FALSE(next_frame_of(*b, "g", 300ms).has_value());
  EXPECT_EQ(history(*b, "g2", R"({"ids":[")" + alpha_post.id + R"("],"#h":["general"]})"),
            std::vector<std::string>{});
  // Alice is not a member of beta's channel: beta refuses her post there.
  auto a_in_beta = login("beta.test", alice);
  auto stray = signed_event(alice, 9, "stray", {{"h", "general"}});
  EXPECT_NE(publish(*a_in_beta, stray).find(",false,\"restricted:"), std::string::npos);
}

TEST_F(channels_e2e, the_relay_publishes_the_roster_after_each_change) {
  auto a = login("alpha.test", alice);
  command(*a, alice, 9007, {{"h", "roster-room"}});
  command(*a, alice, 9000, {{"h", "roster-room"}, {"p", pk(bob), "admin"}});
  command(*a, alice, 9000, {{"h", "roster-room"}, {"p", pk(carol), "guest"}});
  // Published asynchronously after each commit: poll until the last change
  // shows (a bounded wait for an eventual state, not a timing assertion).
  auto relay = node_->relay_pubkey();
  std::string members_raw;
  for (int i = 0; i < 100; ++i) {
    a->send_text(R"(["REQ","m",{"kinds":[39002],"authors":[")" + relay +
                 R"("],"#d":["roster-room"]}])");
    std::string found;
    while (auto f = a->read_text(5s)) {
      if (f->rfind("[\"EOSE\"", 0) == 0)
        break;
      if (f->rfind("[\"EVENT\",\"m\"", 0) == 0)
        found = *f;
    }
    a->send_text(R"(["CLOSE","m"])");
    if (found.find(pk(carol)) != std::string::npos) {
      members_raw = found;
      break;
    }
    std::this_thread::sleep_for(50ms);
  }
  ASSERT_FALSE(members_raw.empty()) << "no 39002 listing carol";
  EXPECT_NE(members_raw.find(R"(["p",")" + pk(alice) + R"(","","owner"])"), std::string::npos);
  EXPECT_NE(members_raw.find(R"(["p",")" + pk(bob) + R"(","","admin"])"), std::string::npos);
  EXPECT_NE(members_raw.find(R"(["p",")" + pk(carol) + R"(","","guest"])"), std::string::npos);
  // Nobody else may publish group state.
  auto forged = signed_event(bob, 39002, "", {{"d", "roster-room"}, {"p", pk(bob), "", "owner"}});
  EXPECT_NE(publish(*a, forged).find(",false,\"restricted:"), std::string::npos);
}

}  // namespace
