#include "messages/proto/bus_payloads.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

using namespace waggle::proto;

TEST(BusPayloads, RosterRequestsRoundTripAndRefuseOtherShapes) {
  auto key = parse_roster_payload(roster_payload(7, "general"));
  ASSERT_TRUE(key);
  EXPECT_EQ(key->community_id, 7);
  EXPECT_EQ(key->channel, "general");
  for (std::string bad : std::vector<std::string>{"", "7", "7\n", "0\ngeneral", "-1\ngeneral", "x7\ngeneral",
                          "99999999999999999999\ngeneral", std::string("7\n") + std::string(300, 'a')})
    EXPECT_FALSE(parse_roster_payload(bad)) << bad;
}

TEST(BusPayloads, EphemeralEventsRoundTripAndRefuseOtherShapes) {
  auto parts = parse_ephemeral_payload(ephemeral_payload("node-a", 3, "{\"id\":\"x\"}"));
  ASSERT_TRUE(parts);
  EXPECT_EQ(parts->origin, "node-a");
  EXPECT_EQ(parts->community_id, 3);
  EXPECT_EQ(parts->raw, "{\"id\":\"x\"}");
  for (std::string bad : std::vector<std::string>{"", "node-a", "node-a\n3", "node-a\nx\n{}", "node-a\n0\n{}"})
    EXPECT_FALSE(parse_ephemeral_payload(bad)) << bad;
}

TEST(BusPayloads, GateAnswersKeepOnlyEventIds) {
  const std::string a(64, 'a'), f(64, 'f');
  std::vector<std::string> ids;
  append_gate_answer_ids(gate_answer_payload({a, "'; DROP TABLE events; --", f, std::string(64, 'A')}),
                         ids);
  EXPECT_EQ(ids, (std::vector<std::string>{a, f}));
  EXPECT_EQ(parse_gate_request(gate_request_payload(42)), 42);
  EXPECT_FALSE(parse_gate_request("42 "));
  EXPECT_FALSE(parse_gate_request("0"));
}

TEST(BusPayloads, ProbesRoundTrip) {
  EXPECT_EQ(parse_probe_number(probe_payload("node-a", 17)), 17u);
  EXPECT_FALSE(parse_probe_number(ping_answer_payload("node-a", "0.1.0")));
  EXPECT_FALSE(parse_probe_number("{\"probe\":-1}"));
}

// A bus payload is up to 1 MiB: nested that deep, rapidjson's recursive
// parser (which the probe used) runs a worker thread out of stack. The
// probe's parser is iterative; with the recursive one this test crashes.
TEST(BusPayloads, AProbeNestedAMebibyteDeepIsRefusedNotACrash) {
  std::string deep(1024 * 1024, '[');
  EXPECT_FALSE(parse_probe_number(deep));
  std::string deep_object = "{\"probe\":" + std::string(1024 * 1024 - 10, '[');
  EXPECT_FALSE(parse_probe_number(deep_object));
}
