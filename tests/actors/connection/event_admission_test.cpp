// classify_event (actors/connection/event_admission.hpp): the one admission path of
// WebSocket EVENT and POST /events. Pure: no actor, no database.

#include <gtest/gtest.h>

#include "actors/connection/event_admission.hpp"
#include "tests/support/event_builder.hpp"

namespace waggle {
namespace {

constexpr int64_t now = 1'700'000'000;
const std::string alice_sk = test::secret(1);
const std::string relay_sk = test::secret(9);

struct AdmissionTest : ::testing::Test {
  std::string alice = proto::pubkey_of(alice_sk);
  std::string relay = proto::pubkey_of(relay_sk);
  std::set<std::string> authed{alice};
  admission_policy policy;

  admission classify(const proto::event& ev, bool ws = true,
                     const std::set<std::string>* who = nullptr) {
    return classify_event(ev, {who ? *who : authed, now, policy, relay, ws});
  }
  test::event_builder from(const std::string& sk) { return test::event_builder{sk}.at(now); }
};

TEST_F(AdmissionTest, RoutesByKind) {
  EXPECT_EQ(classify(from(alice_sk).kind(1).sign()).route, route::store);
  EXPECT_EQ(classify(from(alice_sk).kind(20001).sign()).route, route::ephemeral);
  auto put_user = classify(from(alice_sk).kind(9000).tag({"h", "general"}).sign());
  EXPECT_EQ(put_user.route, route::group_command);
  EXPECT_EQ(put_user.channel, std::optional<std::string>{"general"});
  auto post = classify(from(alice_sk).kind(9).tag({"h", "general"}).sign());
  EXPECT_EQ(post.route, route::store);
  EXPECT_EQ(post.channel, std::optional<std::string>{"general"});
  EXPECT_EQ(classify(from(alice_sk).kind(1).sign()).channel, std::nullopt);
}

TEST_F(AdmissionTest, RefusesBeforeTheDatabase) {
  std::set<std::string> nobody;
  auto unauthed = classify(from(alice_sk).sign(), true, &nobody);
  EXPECT_EQ(unauthed.route, route::reject);
  EXPECT_EQ(unauthed.refusal.code, ec::auth_required);

  auto other = classify(from(test::secret(2)).sign());
  EXPECT_EQ(other.refusal.code, ec::restricted);

  auto auth_event = classify(from(alice_sk).kind(22242).sign());
  EXPECT_EQ(auth_event.refusal.code, ec::invalid);

  auto stale = classify(from(alice_sk).at(now - policy.created_at_window - 1).sign());
  EXPECT_EQ(stale.refusal.code, ec::invalid);

  auto forged = from(alice_sk).sign();
  forged.sig[0] = forged.sig[0] == '0' ? '1' : '0';
  auto bad_sig = classify(forged);
  EXPECT_EQ(bad_sig.route, route::reject);
  EXPECT_EQ(bad_sig.refusal, (status{ec::invalid, "bad signature"}));

  auto two_channels = classify(from(alice_sk).kind(9).tag({"h", "a"}).tag({"h", "b"}).sign());
  EXPECT_EQ(two_channels.route, route::reject);
  EXPECT_EQ(two_channels.refusal.code, ec::invalid);
}

// NIP-40: the same refusal for every route (stored, ephemeral, group
// command), since WebSocket and POST /events both come through here.
TEST_F(AdmissionTest, RefusesExpiredAndMalformedExpiration) {
  auto expiring = [&](int32_t kind, std::string at) {
    auto b = from(alice_sk).kind(kind).tag({"expiration", std::move(at)});
    if (kind == 9000)
      b.tag({"h", "general"});
    return classify(b.sign());
  };
  for (int32_t kind : {1, 20001, 9000}) {
    auto past = expiring(kind, std::to_string(now - 1));
    EXPECT_EQ(past.route, route::reject) << kind;
    EXPECT_EQ(past.refusal, (status{ec::invalid, "event has expired"})) << kind;
    // The expiration second itself has passed.
    EXPECT_EQ(expiring(kind, std::to_string(now)).refusal,
              (status{ec::invalid, "event has expired"})) << kind;
    EXPECT_NE(expiring(kind, std::to_string(now + 1)).route, route::reject) << kind;
  }
  for (std::string bad : {"", "-5", "soon", "1e12", "99999999999999999999"}) {
    auto malformed = expiring(1, bad);
    EXPECT_EQ(malformed.route, route::reject) << bad;
    EXPECT_EQ(malformed.refusal.code, ec::invalid) << bad;
    EXPECT_NE(malformed.refusal.reason.find("expiration"), std::string::npos) << bad;
  }
  // Only the first expiration tag is read.
  auto first_counts = classify(from(alice_sk)
                                 .tag({"expiration", std::to_string(now + 60)})
                                 .tag({"expiration", std::to_string(now - 60)})
                                 .sign());
  EXPECT_EQ(first_counts.route, route::store);
}

TEST_F(AdmissionTest, OnlyTheRelaySignsGroupState) {
  auto forged = classify(from(alice_sk).kind(39002).tag({"d", "general"}).sign());
  EXPECT_EQ(forged.refusal,
            (status{ec::restricted, "group state (kinds 39000-39003) is signed by the relay"}));
  std::set<std::string> relay_authed{relay};
  auto own = classify(from(relay_sk).kind(39002).tag({"d", "general"}).sign(), true, &relay_authed);
  EXPECT_EQ(own.route, route::store);
}

TEST_F(AdmissionTest, EphemeralChannelEventsAreWebSocketOnly) {
  auto typing = from(alice_sk).kind(20001).tag({"h", "general"}).sign();
  auto ws = classify(typing, true);
  EXPECT_EQ(ws.route, route::ephemeral);
  EXPECT_EQ(ws.channel, std::optional<std::string>{"general"});
  auto http = classify(typing, false);
  EXPECT_EQ(http.refusal,
            (status{ec::restricted, "ephemeral channel events are accepted over WebSocket only"}));
  EXPECT_EQ(classify(from(alice_sk).kind(20001).sign(), false).route, route::ephemeral);
}

// `vouched` (import, sync peers; docs/portability.md): the created_at window
// and the authenticated-pubkey check are waived, nothing else.
TEST_F(AdmissionTest, VouchedWaivesTheWindowAndTheAuthenticatedKeyOnly) {
  std::set<std::string> nobody;
  auto vouched = [&](const proto::event& ev) {
    return classify_event(ev, {nobody, now, policy, relay, false, true});
  };
  auto old_post = from(test::secret(2)).at(now - 10 * 365 * 86400).sign();
  EXPECT_EQ(vouched(old_post).route, route::store);
  EXPECT_EQ(vouched(from(test::secret(2)).at(now + 86400).sign()).route, route::store);
  // The same event unvouched: no key on this "connection", then not this key.
  EXPECT_EQ(classify_event(old_post, {nobody, now, policy, relay, false}).refusal.code,
            ec::auth_required);
  EXPECT_EQ(classify(old_post).refusal.code, ec::restricted);

  auto forged = from(alice_sk).sign();
  forged.sig[0] = forged.sig[0] == '0' ? '1' : '0';
  EXPECT_EQ(vouched(forged).refusal, (status{ec::invalid, "bad signature"}));
  EXPECT_EQ(vouched(from(alice_sk).kind(1).tag({"expiration", std::to_string(now - 1)}).sign())
              .refusal,
            (status{ec::invalid, "event has expired"}));
  EXPECT_EQ(vouched(from(alice_sk).kind(22242).sign()).refusal.code, ec::invalid);
  EXPECT_EQ(vouched(from(alice_sk).kind(9).tag({"h", "a"}).tag({"h", "b"}).sign()).refusal.code,
            ec::invalid);
  EXPECT_EQ(vouched(from(alice_sk).kind(39002).tag({"d", "general"}).sign()).refusal.code,
            ec::restricted);
  EXPECT_EQ(vouched(from(alice_sk).kind(8000).sign()).refusal.code, ec::restricted);
  EXPECT_EQ(vouched(from(alice_sk).kind(9000).tag({"h", "general"}).sign()).route,
            route::group_command);
}

}  // namespace
}  // namespace waggle
