// NIP-50 search end to end (docs/search.md): history then EOSE and never a
// live event; private-channel hits never reach a non-member; each community
// searches only itself; COUNT counts matches; hostile strings are clean
// answers; NIP-11 lists 50 only when `--search on`, and with it off a search
// is refused with a clear CLOSED.

#include <algorithm>

#include "tests/e2e/node_fixture.hpp"

using namespace waggle;
using namespace std::chrono_literals;

namespace {

using namespace waggle::e2e;

std::vector<int> supported_nips(uint16_t port, const std::string& host) {
  auto r = gateway::http_request("127.0.0.1", port, "GET", "/",
                                 {{"Host", host}, {"Accept", "application/nostr+json"}});
  std::vector<int> out;
  auto d = parse(r.body);
  for (auto& v : d["supported_nips"].GetArray())
    out.push_back(v.GetInt());
  return out;
}

class search_e2e : public node_e2e {
 protected:
  int64_t count(gateway::ws_client& c, const std::string& filter) {
    c.send_text(R"(["COUNT","n",)" + filter + "]");
    while (auto f = c.read_text(10s)) {
      auto d = parse(*f);
      if (d.IsArray() && d.Size() == 3 && std::string(d[0].GetString()) == "COUNT")
        return d[2]["count"].GetInt64();
      if (d.IsArray() && std::string(d[0].GetString()) == "CLOSED")
        return -2;
    }
    return -1;
  }
  void command(gateway::ws_client& c, const std::string& sk, int32_t kind,
               std::vector<proto::tag> tags) {
    auto ev = signed_event(sk, kind, "", std::move(tags));
    ASSERT_EQ(publish(c, ev), proto::render_ok(ev.id, true, "")) << "kind " << kind;
  }
  void publish_ok(gateway::ws_client& c, const proto::event& ev) {
    ASSERT_EQ(publish(c, ev), proto::render_ok(ev.id, true, ""));
  }
};

TEST_F(search_e2e, nip11_lists_50) {
  auto nips = supported_nips(port_, "alpha.test");
  EXPECT_NE(std::find(nips.begin(), nips.end(), 50), nips.end());
  EXPECT_TRUE(std::is_sorted(nips.begin(), nips.end()));
}

// One-shot: the history's matches, EOSE, and then nothing, even for an
// event with every word. The live subscription on the same connection is
// the control: the hub hands both subscriptions of one connection their
// events in one message, so once the control's event and a later marker
// REQ's EOSE are in, a live event for the search would have come first.
TEST_F(search_e2e, a_search_gets_history_then_eose_and_never_a_live_event) {
  auto a = login("alpha.test", alice);
  auto b = login("alpha.test", bob);
  auto old = signed_event(alice, 1, "nectar flow started early");
  publish_ok(*a, old);
  EXPECT_EQ(history(*b, "s", R"({"search":"nectar flow"})"), std::vector<std::string>{old.id});
  EXPECT_EQ(history(*b, "live", R"({"kinds":[1]})"), std::vector<std::string>{old.id});
  auto fresh = signed_event(alice, 1, "nectar flow is strong today");
  publish_ok(*a, fresh);
  bool control = false, leaked = false;
  while (auto f = b->read_text(10s)) {
    auto d = parse(*f);
    std::string verb = d[0].GetString();
    if (verb == "EVENT" && std::string(d[1].GetString()) == "s")
      leaked = true;
    if (verb == "EVENT" && std::string(d[1].GetString()) == "live" &&
        std::string(d[2]["id"].GetString()) == fresh.id)
      control = true;
    if (control)
      break;
  }
  ASSERT_TRUE(control) << "the live control subscription never got the event";
  EXPECT_EQ(history(*b, "marker", R"({"ids":[")" + std::string(64, '0') + R"("]})"),
            std::vector<std::string>{});
  EXPECT_FALSE(leaked) << "a live event reached the search subscription";
  // The search still finds it as history.
  EXPECT_EQ(history(*b, "again", R"({"search":"strong nectar"})"), std::vector<std::string>{fresh.id});
}

TEST_F(search_e2e, a_private_channels_hits_never_reach_a_non_member) {
  auto a = login("alpha.test", alice);
  command(*a, alice, 9007, {{"h", "hive-vault"}, {"private"}});
  auto hit = signed_event(alice, 9, "royal jelly location", {{"h", "hive-vault"}});
  publish_ok(*a, hit);
  auto b = login("alpha.test", bob);
  auto refused = history(*b, "s", R"({"search":"royal jelly","#h":["hive-vault"]})");
  ASSERT_EQ(refused.size(), 1u);
  EXPECT_EQ(refused[0].rfind("CLOSED:restricted:", 0), 0u) << refused[0];
  EXPECT_EQ(history(*b, "t", R"({"search":"royal jelly"})"), std::vector<std::string>{});
  EXPECT_EQ(history(*b, "u", R"({"search":"royal jelly","kinds":[9]})"), std::vector<std::string>{});
  EXPECT_EQ(count(*b, R"({"search":"royal jelly"})"), 0);
  EXPECT_EQ(count(*b, R"({"search":"royal jelly","#h":["hive-vault"]})"), -2);  // CLOSED
  // The member finds it, naming the channel.
  EXPECT_EQ(history(*a, "m", R"({"search":"royal jelly","#h":["hive-vault"]})"),
            std::vector<std::string>{hit.id});
}

TEST_F(search_e2e, each_community_searches_only_itself) {
  auto a = login("alpha.test", alice);
  auto b = login("beta.test", alice);
  auto in_alpha = signed_event(alice, 1, "propolis sample alpha");
  auto in_beta = signed_event(alice, 1, "propolis sample beta");
  publish_ok(*a, in_alpha);
  publish_ok(*b, in_beta);
  EXPECT_EQ(history(*a, "s", R"({"search":"propolis"})"), std::vector<std::string>{in_alpha.id});
  EXPECT_EQ(history(*b, "s", R"({"search":"propolis"})"), std::vector<std::string>{in_beta.id});
  EXPECT_EQ(count(*a, R"({"search":"propolis sample"})"), 1);
  EXPECT_EQ(history(*a, "t", R"({"search":"beta"})"), std::vector<std::string>{});
}

TEST_F(search_e2e, hostile_strings_get_clean_answers_and_change_nothing) {
  auto a = login("alpha.test", alice);
  auto ev = signed_event(alice, 1, "drop table events is just text here");
  publish_ok(*a, ev);
  EXPECT_EQ(history(*a, "s", R"({"search":"'; drop table events; --"})"), std::vector<std::string>{ev.id});
  EXPECT_EQ(history(*a, "t", R"({"search":"a & | !"})"), std::vector<std::string>{});
  EXPECT_EQ(history(*a, "u", R"({"search":"\"unterminated"})"), std::vector<std::string>{});
  EXPECT_EQ(history(*a, "v", R"({"search":"x\u0000y"})"), std::vector<std::string>{});
  EXPECT_EQ(history(*a, "w", R"({"search":"   "})"), std::vector<std::string>{});
  auto long_one = history(*a, "x", R"({"search":")" + std::string(10240, 'x') + R"("})");
  ASSERT_EQ(long_one.size(), 1u);
  EXPECT_EQ(long_one[0], "CLOSED:invalid: search too long (max 1024 bytes)");
  // Still serving, and the event is still there.
  EXPECT_EQ(history(*a, "y", R"({"ids":[")" + ev.id + R"("]})"), std::vector<std::string>{ev.id});
  auto after = signed_event(alice, 1, "still writable");
  publish_ok(*a, after);
}

class search_off_e2e : public node_e2e {
 protected:
  static void SetUpTestSuite() {
    configure_ = [](node_config& cfg, gateway::server_limits&) { cfg.search = false; };
    node_e2e::SetUpTestSuite();
  }
  static void TearDownTestSuite() {
    node_e2e::TearDownTestSuite();
    configure_ = nullptr;
  }
};

TEST_F(search_off_e2e, nip11_omits_50_and_a_search_is_refused_clearly) {
  auto nips = supported_nips(port_, "alpha.test");
  EXPECT_EQ(std::find(nips.begin(), nips.end(), 50), nips.end());
  EXPECT_NE(std::find(nips.begin(), nips.end(), 45), nips.end());
  auto a = login("alpha.test", alice);
  auto refused = history(*a, "s", R"({"search":"bees"})");
  ASSERT_EQ(refused.size(), 1u);
  EXPECT_EQ(refused[0], "CLOSED:invalid: search is off on this relay (NIP-50 is not supported here)");
  a->send_text(R"(["COUNT","c",{"search":"bees"}])");
  auto f = a->read_text(10s);
  ASSERT_TRUE(f.has_value());
  EXPECT_EQ(*f, R"x(["CLOSED","c","invalid: search is off on this relay (NIP-50 is not supported here)"])x");
  EXPECT_EQ(history(*a, "k", R"({"kinds":[1]})"), std::vector<std::string>{});  // the rest works
}

}  // namespace
