// Push leases and push matching as plain functions (docs/push.md).

#include <gtest/gtest.h>

#include "messages/proto/push.hpp"
#include "tests/support/event_builder.hpp"

namespace waggle::proto::push {
namespace {

constexpr int64_t now = 1'800'000'000;

event lease_with(std::vector<tag> tags) {
  event ev;
  ev.kind = kind_lease;
  ev.tags = std::move(tags);
  return ev;
}

std::vector<tag> valid_tags() {
  return {{"d", "phone-1"},
          {"endpoint", "grant"},
          {"app", "ios"},
          {"expiration", std::to_string(now + 60)},
          {"generation", "3"}};
}

TEST(PushLease, AValidLeaseParsesWithItsEndpointHash) {
  auto tags = valid_tags();
  tags.push_back({"channel", "general"});
  tags.push_back({"k", "9"});
  tags.push_back({"k", "9"});
  tags.push_back({"mute", "random"});
  auto l = parse_lease(lease_with(tags), now);
  ASSERT_TRUE(l) << l.error().reason;
  EXPECT_EQ(l->installation_id, "phone-1");
  EXPECT_EQ(l->generation, 3);
  EXPECT_EQ(l->channels, std::vector<std::string>{"general"});
  EXPECT_EQ(l->kinds, std::vector<int32_t>{9});
  EXPECT_EQ(l->mutes, std::vector<std::string>{"random"});
  EXPECT_EQ(l->endpoint_hash.size(), 64u);
}

TEST(PushLease, EachMissingOrBadFieldIsInvalid) {
  auto without = [](const std::string& name) {
    std::vector<tag> out;
    for (auto& t : valid_tags())
      if (t[0] != name)
        out.push_back(t);
    return out;
  };
  for (const char* name : {"d", "endpoint", "app", "expiration", "generation"}) {
    auto l = parse_lease(lease_with(without(name)), now);
    ASSERT_FALSE(l) << name;
    EXPECT_EQ(l.error().code, ec::invalid);
  }
  auto with = [](const tag& extra, const std::string& replaces = "") {
    std::vector<tag> out;
    for (auto& t : valid_tags())
      if (t[0] != replaces)
        out.push_back(t);
    out.push_back(extra);
    return out;
  };
  EXPECT_FALSE(parse_lease(lease_with(with({"expiration", std::to_string(now)}, "expiration")), now));
  EXPECT_FALSE(parse_lease(lease_with(with({"expiration", "1e9"}, "expiration")), now));
  EXPECT_FALSE(parse_lease(lease_with(with({"expiration", std::to_string(now + 40 * 86400)},
                                           "expiration")),
                           now));
  EXPECT_FALSE(parse_lease(lease_with(with({"generation", "0"}, "generation")), now));
  EXPECT_FALSE(parse_lease(lease_with(with({"generation", "-1"}, "generation")), now));
  EXPECT_FALSE(parse_lease(lease_with(with({"d", "a b"}, "d")), now));
  EXPECT_FALSE(parse_lease(lease_with(with({"d", "x'; DROP TABLE push_leases;--"}, "d")), now));
  EXPECT_FALSE(parse_lease(lease_with(with({"k", "1"})), now)) << "not a push kind";
  EXPECT_FALSE(parse_lease(lease_with(with({"channel", "Has,Comma"})), now));
  EXPECT_FALSE(parse_lease(lease_with(with({"endpoint", std::string("a\0b", 3)}, "endpoint")), now));
  EXPECT_FALSE(parse_lease(lease_with(with({"endpoint", std::string(513, 'g')}, "endpoint")), now));
}

TEST(PushLease, OnlyKind30350IsALease) {
  auto ev = lease_with(valid_tags());
  ev.kind = 30351;
  EXPECT_FALSE(parse_lease(ev, now));
}

// -- matching -------------------------------------------------------------------

const std::string alice(64, 'a'), bob(64, 'b'), carol(64, 'c');

match_event msg(const std::string& author, int32_t kind = 9,
                std::optional<std::string> channel = std::nullopt) {
  return {std::string(64, '1'), author, kind, std::move(channel)};
}

std::vector<readable_pair> everyone(size_t events, const std::vector<match_lease>& leases) {
  std::vector<readable_pair> out;
  for (size_t e = 0; e < events; ++e)
    for (auto& l : leases)
      out.push_back({e, l.author});
  std::sort(out.begin(), out.end());
  return out;
}

TEST(PushMatch, AMemberIsWokenForOthersMessagesButNotTheirOwn) {
  std::vector<match_lease> leases = {{alice, "p", 1, {}, {}, {}}, {bob, "p", 1, {}, {}, {}}};
  std::vector<match_event> events = {msg(alice)};
  auto r = everyone(1, leases);
  EXPECT_EQ(match_wakes(events, leases, &r), (std::vector<wake_request>{{0, 1}}));
}

TEST(PushMatch, UnreadableEventsWakeNobody) {
  std::vector<match_lease> leases = {{bob, "p", 1, {}, {}, {}}};
  std::vector<readable_pair> none;
  EXPECT_TRUE(match_wakes({msg(alice)}, leases, &none).empty());
  // Without the readable pairs: the candidates the database is asked about.
  EXPECT_EQ(match_wakes({msg(alice)}, leases, nullptr).size(), 1u);
}

TEST(PushMatch, ChannelKindAndMuteFilters) {
  match_lease only_general{bob, "p", 1, {"general"}, {}, {}};
  match_lease only_kind{bob, "q", 1, {}, {45001}, {}};
  match_lease mutes_random{bob, "r", 1, {}, {}, {"random"}};
  std::vector<match_lease> leases = {only_general, only_kind, mutes_random};
  std::vector<match_event> events = {msg(alice, 9, "general"), msg(alice, 9, "random"),
                                     msg(alice, 45001), msg(alice, 1, "general")};
  auto r = everyone(events.size(), leases);
  auto w = match_wakes(events, leases, &r);
  EXPECT_EQ(w, (std::vector<wake_request>{{0, 0}, {0, 2}, {2, 1}, {2, 2}}));
}

TEST(PushMatch, TheGatewayBodyCarriesNoContent) {
  auto body = gateway_body("req-1", "gr\"ant", 42, "team.example", std::string(64, 'e'));
  EXPECT_EQ(body, R"({"v":1,"request_id":"req-1","endpoint_grant":"gr\"ant","expires_at":42,)"
                  R"("community":"team.example","event_id":")" +
                    std::string(64, 'e') + "\"}");
}

}  // namespace
}  // namespace waggle::proto::push
