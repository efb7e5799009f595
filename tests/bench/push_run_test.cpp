// The push workload's accounting: a wake benchmark is only as honest as its
// matching of the gateway's requests to the messages the relay accepted
// (owed, received, duplicated, retried, unexpected, foreign, malformed).

#include <gtest/gtest.h>

#include "bench/load/push_run.hpp"

using namespace waggle::bench;

namespace {

std::vector<prepared_event> some_events(size_t n) {
  auto key = random_keypair();
  return sign_all(n, 1, [&](size_t i, const keypair*& signer) {
    signer = &key;
    waggle::proto::event ev;
    ev.kind = 9;
    ev.created_at = 1'760'000'000;
    ev.content = filler(20, i);
    return ev;
  });
}

mock_push_gateway::wake wake_for(const std::string& event_id, const std::string& request_id,
                                 int64_t at_ns, const std::string& grant = "g") {
  mock_push_gateway::wake w;
  w.parsed = true;
  w.v = 1;
  w.event_id = event_id;
  w.request_id = request_id;
  w.delivery_id = request_id;
  w.endpoint_grant = grant;
  w.authorization = "Nostr abc";
  w.at_ns = at_ns;
  return w;
}

}  // namespace

TEST(PushTally, MatchesWakesToAcceptedMessagesOfTheStep) {
  auto events = some_events(5);
  publish_clock clock{events};
  auto t0 = now_ns();
  for (size_t k = 0; k < 4; ++k)  // event 4 was never accepted
    clock.mark_accepted(k, t0);
  auto ms = [&](int n) { return t0 + n * 1'000'000; };
  std::vector<mock_push_gateway::wake> wakes{
    wake_for(events[0].id, "r0", ms(10)),
    wake_for(events[1].id, "r1", ms(30)),
    wake_for(events[0].id, "r0", ms(40)),   // a retry of event 0's wake
    wake_for(events[2].id, "r2", ms(20)),
    wake_for(events[2].id, "r2b", ms(50)),  // a second wake for event 2: a real duplicate
    wake_for(events[4].id, "r4", ms(5)),    // not accepted: owed by nobody
    wake_for(std::string(64, 'f'), "rf", ms(5)),  // of no step
    wake_for("warm", "rw", ms(1)),
    wake_for(events[3].id, "r3", ms(5), "another grant"),
  };
  auto no_auth = wake_for(events[3].id, "r3", ms(5));
  no_auth.authorization = "";
  auto other_id = wake_for(events[3].id, "r3", ms(5));
  other_id.delivery_id = "x";
  auto unparsed = wake_for(events[3].id, "r3", ms(5));
  unparsed.parsed = false;
  wakes.insert(wakes.end(), {no_auth, other_id, unparsed});

  push_result r;
  r.steps.resize(1);
  tally_wakes(wakes, "g", "warm", {{&clock, true}}, r);
  auto& s = r.steps[0];
  EXPECT_EQ(r.gateway_requests, wakes.size());
  EXPECT_EQ(s.wakes_owed, 4u);
  EXPECT_EQ(s.wakes_received, 3u);  // 0, 1, 2; event 3's wakes were all malformed
  EXPECT_EQ(s.wakes_missing, 1u);
  EXPECT_EQ(s.wake_duplicates, 2u);
  EXPECT_EQ(s.wake_retries, 1u);
  EXPECT_EQ(s.wakes_unexpected, 1u);
  EXPECT_EQ(r.wakes_foreign, 1u);
  EXPECT_EQ(r.warmup_wakes, 1u);
  EXPECT_EQ(r.wakes_malformed, 4u);
  // OK -> first receipt: 10, 20, 30 ms.
  EXPECT_EQ(s.wake_ms.count, 3u);
  EXPECT_DOUBLE_EQ(s.wake_ms.p50, 20);
  EXPECT_DOUBLE_EQ(s.wake_ms.max, 30);
  EXPECT_FALSE(r.clean());
  EXPECT_EQ(owed_received(wakes, clock), 4u);  // the drain wait counts any wake of an accepted event
}

TEST(PushTally, NoLeaseOwesNothingAndEveryWakeIsUnexpected) {
  auto a = some_events(2), b = some_events(2);
  publish_clock first{a}, second{b};
  for (size_t k = 0; k < 2; ++k) {
    first.mark_accepted(k, now_ns());
    second.mark_accepted(k, now_ns());
  }
  push_result r;
  r.steps.resize(2);
  tally_wakes({wake_for(b[1].id, "r", now_ns())}, "", "", {{&first, false}, {&second, false}}, r);
  EXPECT_EQ(r.steps[0].wakes_owed, 0u);
  EXPECT_EQ(r.steps[0].wakes_unexpected, 0u);
  EXPECT_EQ(r.steps[1].wakes_owed, 0u);
  EXPECT_EQ(r.steps[1].wakes_unexpected, 1u);
  EXPECT_FALSE(r.clean());
  r.steps[1].wakes_unexpected = 0;
  EXPECT_TRUE(r.clean());
}

TEST(PushReport, StepsAreKeyedByRateForSummarize) {
  push_result r;
  r.options.push_scenario = "B";
  push_step_result s;
  s.rate = 100;
  s.outcomes.accepted = 6000;
  s.wakes_owed = 6000;
  s.wakes_received = 5999;
  s.wakes_missing = 1;
  commit_count cc;
  cc.per_message = 1.75;
  s.commits = cc;
  r.steps.push_back(s);
  s.rate = 2.5;
  r.steps.push_back(s);
  r.idle = push_idle_control{71, 142, 2};
  auto sum = summarize_runs({to_json(r)}, "push-B");
  ASSERT_TRUE(sum.error.empty()) << sum.error;
  EXPECT_EQ(sum.medians.at("steps/100/commits/per_message"), 1.75);
  EXPECT_EQ(sum.medians.at("steps/100/wakes/missing"), 1);
  EXPECT_EQ(sum.medians.at("steps/2.5/wakes/owed"), 6000);
  EXPECT_EQ(sum.medians.at("idle/commits_per_s"), 2);
  EXPECT_NE(to_markdown(r).find("| 100 | 1.750 |"), std::string::npos);
}

TEST(PushOptions, NeedsAScenarioAndAGatewayPort) {
  auto bad = [](std::vector<std::string> args) {
    return std::holds_alternative<std::string>(parse_load_options(std::move(args)));
  };
  EXPECT_TRUE(bad({"--workload", "push", "--push-gateway-port", "7100"}));
  EXPECT_TRUE(bad({"--workload", "push", "--push-scenario", "A"}));
  EXPECT_TRUE(bad({"--workload", "push", "--push-scenario", "C", "--push-gateway-port", "1"}));
  EXPECT_TRUE(bad({"--workload", "publish", "--push-scenario", "A"}));
  EXPECT_TRUE(bad({"--workload", "push", "--push-scenario", "A", "--push-gateway-port", "1",
                   "--push-rates", "5,0"}));
  auto o = std::get<load_options>(parse_load_options(
    {"--workload", "push", "--push-scenario", "B", "--push-gateway-port", "7100"}));
  EXPECT_EQ(o.push_rates, (std::vector<double>{5, 10, 30, 50, 100}));
  EXPECT_EQ(o.step_seconds, 60);
  EXPECT_EQ(o.drain_wait, 30);
  auto q = std::get<load_options>(
    parse_load_options({"--workload", "push", "--push-scenario", "A", "--push-gateway-port", "7100",
                        "--push-rates", "5,100", "--step-seconds", "3"}));
  EXPECT_EQ(q.push_rates, (std::vector<double>{5, 100}));
  EXPECT_EQ(q.step_seconds, 3);
}
