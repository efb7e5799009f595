// strfry's plugin protocol as pure functions (messages/proto/write_policy.hpp)
// and how a plugin's reject is answered (messages/outcome.hpp).

#include <vector>

#include <gtest/gtest.h>
#include <rapidjson/document.h>

#include "messages/outcome.hpp"
#include "messages/proto/write_policy.hpp"
#include "tests/support/event_builder.hpp"

namespace waggle {
namespace {

const std::string sk(64, '3');

TEST(WritePolicyProtocol, RequestIsOneStrfryLineWithTheEventAndItsSource) {
  auto ev = test::event_builder{sk}.kind(1).content("hello \"world\"\n").at(1700000000).sign();
  auto line = proto::render_policy_request(ev, 1700000005, "10.1.2.3");
  ASSERT_EQ(line.back(), '\n');
  EXPECT_EQ(line.find('\n'), line.size() - 1) << "exactly one line";
  rapidjson::Document d;
  d.Parse(line.c_str(), line.size() - 1);
  ASSERT_FALSE(d.HasParseError());
  EXPECT_STREQ(d["type"].GetString(), "new");
  EXPECT_STREQ(d["event"]["id"].GetString(), ev.id.c_str());
  EXPECT_STREQ(d["event"]["content"].GetString(), "hello \"world\"\n");
  EXPECT_EQ(d["receivedAt"].GetInt64(), 1700000005);
  EXPECT_STREQ(d["sourceType"].GetString(), "IP4");
  EXPECT_STREQ(d["sourceInfo"].GetString(), "10.1.2.3");
  auto v6 = proto::render_policy_request(ev, 1, "::1");
  EXPECT_NE(v6.find(R"("sourceType":"IP6","sourceInfo":"::1")"), std::string::npos) << v6;
}

TEST(WritePolicyProtocol, ParsesTheThreeActions) {
  std::string id(64, 'a');
  auto a = proto::parse_policy_answer(R"({"id":")" + id + R"(","action":"accept"})");
  ASSERT_TRUE(a.has_value());
  EXPECT_EQ(a->id, id);
  EXPECT_EQ(a->action, policy_action::accept);
  EXPECT_EQ(a->msg, "");
  auto r = proto::parse_policy_answer(R"({"id":")" + id + R"(","action":"reject","msg":"no spam"})");
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->action, policy_action::reject);
  EXPECT_EQ(r->msg, "no spam");
  auto s = proto::parse_policy_answer(R"({"action":"shadowReject","id":")" + id + R"("})");
  ASSERT_TRUE(s.has_value());
  EXPECT_EQ(s->action, policy_action::shadow_reject);
}

TEST(WritePolicyProtocol, RefusesMalformedAnswers) {
  std::string id(64, 'a');
  for (std::string bad : std::vector<std::string>{"", "accept", "[]",
                          R"({"action":"accept"})",
                          R"({"id":"abc","action":"accept"})",
                          R"({"id":")" + std::string(64, 'A') + R"(","action":"accept"})",
                          R"({"id":")" + id + R"("})",
                          R"({"id":")" + id + R"(","action":"maybe"})",
                          R"({"id":")" + id + R"(","action":"reject","msg":5})",
                          R"({"id":")" + id + R"(","action":"accept")"})
    EXPECT_FALSE(proto::parse_policy_answer(bad).has_value()) << bad;
}

TEST(WritePolicyProtocol, RejectMessagesKeepANip01PrefixOrGetBlocked) {
  auto plain = answer_for_policy_reject("no spam here");
  EXPECT_FALSE(plain.accepted);
  EXPECT_EQ(plain.message, "blocked: no spam here");
  EXPECT_EQ(plain.metric, "blocked");
  EXPECT_EQ(plain.http_status, 403);
  EXPECT_EQ(answer_for_policy_reject("").message, "blocked: rejected by write policy");
  auto invalid = answer_for_policy_reject("invalid: bad tag");
  EXPECT_EQ(invalid.message, "invalid: bad tag");
  EXPECT_EQ(invalid.http_status, 400);
  EXPECT_EQ(answer_for_policy_reject("rate-limited: slow down").http_status, 429);
  auto pow = answer_for_policy_reject("pow: difficulty 20 required");
  EXPECT_FALSE(pow.accepted);
  EXPECT_EQ(pow.message, "pow: difficulty 20 required");
  // Not a prefix: a word with a colon later in the text.
  EXPECT_EQ(answer_for_policy_reject("note: spam").message, "blocked: note: spam");
  EXPECT_FALSE(answer_for_policy_reject("duplicate: seen").accepted);
}

}  // namespace
}  // namespace waggle
