// The isolation red-team suite (issue 34; docs/reliability.md, "Isolation"):
// a client of one community tries to read, count, search or subscribe to
// another's events, to post into another community, and to pass for another
// community by Host-header tricks, NIP-42's relay tag and NIP-98's `u`. One
// node over a scratch database with two open communities, alpha.test and
// beta.test (tests/e2e/node_fixture.hpp); every attempt must come back empty
// or refused (each refusal counted in waggle_refusals_total and logged), and
// nothing of beta's may show on alpha. Listener registrations:
// OperatorListenerE2E.ARegistrationInOneCommunityWakesNothingInAnother. Private channels
// (members only, by every path) are proved in tests/e2e/channels_*; replicas
// in tests/e2e/replica_redteam_test.cpp (EveryRoutedPathReturnsOnlyTheCallersCommunity).

#include <algorithm>

#include "tests/e2e/node_fixture.hpp"

namespace waggle::e2e {
namespace {

class isolation : public node_e2e {
 protected:
  static void TearDownTestSuite() {
    delete secret_event_;
    secret_event_ = nullptr;
    node_e2e::TearDownTestSuite();
  }

  // beta's secret, stored by the first test that asks: every attempt below
  // looks for it from alpha.
  const proto::event& secret() {
    if (!secret_event_) {
      auto beta = login("beta.test", pgtest::secret(71));
      secret_event_ = new proto::event(
        signed_event(pgtest::secret(71), 1, "zanzibar-quokka the beta team's secret"));
      auto ok = publish(*beta, *secret_event_);
      EXPECT_NE(ok.find(",true,"), std::string::npos) << ok;
    }
    return *secret_event_;
  }
  static inline proto::event* secret_event_ = nullptr;

  // COUNT on `c`; the count, or -1 for anything else.
  int64_t count(gateway::ws_client& c, const std::string& filter) {
    c.send_text("[\"COUNT\",\"n\"," + filter + "]");
    while (auto f = c.read_text(10s)) {
      auto d = parse(*f);
      if (std::string(d[0].GetString()) == "COUNT")
        return d[2]["count"].GetInt64();
      if (std::string(d[0].GetString()) == "CLOSED")
        return -1;
    }
    return -1;
  }
  // waggle_refusals_total of `reason` (0 before its first).
  uint64_t refusals(const std::string& reason) {
    auto text = node_->api().watch->metrics_text();
    auto line = "waggle_refusals_total{reason=\"" + reason + "\"} ";
    auto at = text.find(line);
    return at == std::string::npos ? 0 : std::stoull(text.substr(at + line.size()));
  }
  // NIP-11's name as the node answers it for this Host header value; the
  // status when it is not 200.
  std::string nip11_name(const gateway::header_list& headers, const std::string& target = "/") {
    auto r = gateway::http_request("127.0.0.1", port_, "GET", target, headers, {}, 5s);
    if (r.status != 200)
      return "status " + std::to_string(r.status);
    auto d = parse(r.body);
    return d.IsObject() && d.HasMember("name") ? d["name"].GetString() : "(no name)";
  }
};

TEST_F(isolation, a_req_by_the_others_event_id_finds_nothing) {
  auto alpha = login("alpha.test", pgtest::secret(72));
  EXPECT_TRUE(history(*alpha, "byid", "{\"ids\":[\"" + secret().id + "\"]}").empty());
  EXPECT_TRUE(history(*alpha, "byauthor", "{\"authors\":[\"" + secret().pubkey + "\"]}").empty());
  // The control: the same REQ on beta finds it, so the empty answers above say something.
  auto beta = login("beta.test", pgtest::secret(73));
  EXPECT_EQ(history(*beta, "byid", "{\"ids\":[\"" + secret().id + "\"]}"),
            std::vector<std::string>{secret().id});
}

TEST_F(isolation, a_count_of_the_others_events_is_zero) {
  secret();
  auto alpha = login("alpha.test", pgtest::secret(72));
  EXPECT_EQ(count(*alpha, "{\"ids\":[\"" + secret().id + "\"]}"), 0);
  EXPECT_EQ(count(*alpha, "{\"authors\":[\"" + secret().pubkey + "\"]}"), 0);
  EXPECT_EQ(count(*alpha, "{\"search\":\"zanzibar-quokka\"}"), 0);
  auto beta = login("beta.test", pgtest::secret(73));
  EXPECT_EQ(count(*beta, "{\"search\":\"zanzibar-quokka\"}"), 1) << "the control";
}

TEST_F(isolation, a_search_for_the_others_words_finds_nothing) {
  secret();
  auto alpha = login("alpha.test", pgtest::secret(72));
  EXPECT_TRUE(history(*alpha, "s", "{\"search\":\"zanzibar-quokka\"}").empty());
  EXPECT_TRUE(history(*alpha, "s2", "{\"search\":\"secret\"}").empty());
  auto beta = login("beta.test", pgtest::secret(73));
  EXPECT_EQ(history(*beta, "s", "{\"search\":\"zanzibar-quokka\"}"),
            std::vector<std::string>{secret().id})
    << "the control";
}

// A live subscription on alpha hears nothing of beta: beta's event is posted,
// then a marker on alpha; the marker arrives and nothing came before it.
TEST_F(isolation, a_live_subscription_hears_nothing_of_the_other) {
  auto alpha = login("alpha.test", pgtest::secret(72));
  auto beta = login("beta.test", pgtest::secret(73));
  alpha->send_text(R"(["REQ","live",{"kinds":[1],"limit":0}])");
  auto eose = alpha->read_text(5s);
  ASSERT_TRUE(eose && eose->find("EOSE") != std::string::npos) << eose.value_or("(none)");
  auto theirs = signed_event(pgtest::secret(73), 1, "beta only, live");
  ASSERT_NE(publish(*beta, theirs).find(",true,"), std::string::npos);
  auto poster = login("alpha.test", pgtest::secret(74));
  auto marker = signed_event(pgtest::secret(74), 1, "alpha marker");
  ASSERT_NE(publish(*poster, marker).find(",true,"), std::string::npos);
  while (auto f = alpha->read_text(10s)) {
    EXPECT_EQ(f->find(theirs.id), std::string::npos) << "beta's event reached alpha: " << *f;
    if (f->find(marker.id) != std::string::npos)
      return;
  }
  FAIL() << "the marker never arrived";
}

// POST /events to alpha with a NIP-98 token whose `u` names beta (a token
// captured from beta's traffic): 401, and the event is stored nowhere.
TEST_F(isolation, a_post_with_a_token_for_the_other_community_is_refused) {
  auto ev = signed_event(pgtest::secret(75), 1, "posted with beta's token on alpha");
  auto before = refusals("nip98");
  auto r = post_event("alpha.test", pgtest::secret(75), ev, "http://beta.test/events");
  EXPECT_EQ(r.status, 401u) << r.body;
  EXPECT_EQ(refusals("nip98"), before + 1);
  auto alpha = login("alpha.test", pgtest::secret(72));
  auto beta = login("beta.test", pgtest::secret(73));
  EXPECT_TRUE(history(*alpha, "p", "{\"ids\":[\"" + ev.id + "\"]}").empty());
  EXPECT_TRUE(history(*beta, "p", "{\"ids\":[\"" + ev.id + "\"]}").empty());
}

// NIP-42 on alpha's connection with a `relay` tag naming beta: refused, and
// the connection stays unauthenticated.
TEST_F(isolation, an_auth_for_the_other_community_is_refused) {
  gateway::ws_client c;
  ASSERT_TRUE(c.connect("127.0.0.1", port_, "alpha.test")) << c.error();
  auto challenge = c.read_text(5s);
  ASSERT_TRUE(challenge.has_value());
  auto d = parse(*challenge);
  auto auth = signed_event(pgtest::secret(76), 22242, "",
                           {{"relay", "ws://beta.test/"}, {"challenge", d[1].GetString()}});
  c.send_text("[\"AUTH\"," + auth.raw + "]");
  auto ok = c.read_text(5s);
  ASSERT_TRUE(ok.has_value());
  EXPECT_NE(ok->find(",false,"), std::string::npos) << *ok;
}

// Host-header spellings of alpha are alpha (DNS names are case-insensitive,
// a trailing dot is the absolute form, a port is not part of the name);
// nothing spelled any way reaches beta from alpha's name. Unknown hosts and
// SQL-looking hosts are refused.
TEST_F(isolation, host_header_tricks_never_reach_the_other_community) {
  EXPECT_EQ(nip11_name({{"Host", "ALPHA.TEST"}, {"Accept", "application/nostr+json"}}), "Alpha");
  EXPECT_EQ(nip11_name({{"Host", "alpha.test."}, {"Accept", "application/nostr+json"}}), "Alpha");
  EXPECT_EQ(nip11_name({{"Host", "alpha.test:1"}, {"Accept", "application/nostr+json"}}), "Alpha");
  // Two Host headers are a 400 on every path: abuse_correctness_e2e's
  // two_host_headers_are_a_400_on_every_path (raw requests; this client sends one).
  auto absolute = nip11_name({{"Host", "alpha.test"}, {"Accept", "application/nostr+json"}},
                             "http://beta.test/");
  EXPECT_NE(absolute, "Beta") << "an absolute-form target moved the request to beta";
  std::printf("[ observed ] absolute-form target http://beta.test/ with Host alpha.test: %s\n",
              absolute.c_str());
  auto unknown_before = refusals("host_unknown"), missing_before = refusals("host_missing");
  for (const char* host : {"gamma.test", "alpha.test' OR '1'='1", "alpha.test%00beta.test",
                           "alpha.test@beta.test", "beta.test.alpha.test", ""}) {
    auto name = nip11_name({{"Host", host}, {"Accept", "application/nostr+json"}});
    EXPECT_TRUE(name.rfind("status 4", 0) == 0) << host << " -> " << name;
    std::printf("[ observed ] Host \"%s\": %s\n", host, name.c_str());
  }
  // Refused, and counted (and logged, once a second per reason at most).
  EXPECT_EQ(refusals("host_unknown"), unknown_before + 5);
  EXPECT_EQ(refusals("host_missing"), missing_before + 1);
  // A WebSocket opened as ALPHA.TEST: alpha's community, beta's secret unseen.
  auto c = login("ALPHA.TEST", pgtest::secret(72));
  EXPECT_TRUE(history(*c, "case", "{\"ids\":[\"" + secret().id + "\"]}").empty());
}

}  // namespace
}  // namespace waggle::e2e
