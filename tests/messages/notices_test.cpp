// The gateway's own answers, rendered in messages/proto: its NOTICEs
// (notices.hpp) are NIP-01 NOTICE frames with the standard prefixes, and POST
// /events's body (render_submit_reply) is the OK's content as an object.

#include <chrono>
#include <string>

#include <gtest/gtest.h>
#include <rapidjson/document.h>

#include "messages/proto/client_message.hpp"
#include "messages/proto/notices.hpp"

namespace waggle {
namespace {

// The message of a well-formed ["NOTICE", <string>] frame; fails the test otherwise.
std::string notice_message(const std::string& frame) {
  rapidjson::Document doc;
  doc.Parse(frame.c_str(), frame.size());
  EXPECT_FALSE(doc.HasParseError()) << frame;
  if (!doc.IsArray() || doc.Size() != 2 || !doc[0].IsString() || !doc[1].IsString()) {
    ADD_FAILURE() << "not a NOTICE frame: " << frame;
    return {};
  }
  EXPECT_STREQ(doc[0].GetString(), "NOTICE");
  return doc[1].GetString();
}

bool starts_with(const std::string& s, const std::string& prefix) {
  return s.rfind(prefix, 0) == 0;
}

TEST(GatewayNotices, SlowConsumerIsRateLimited) {
  auto msg = notice_message(proto::slow_consumer_notice());
  EXPECT_EQ(msg, "rate-limited: slow consumer, closing");
}

TEST(GatewayNotices, AuthDeadlineIsAuthRequiredAndNamesTheDeadline) {
  auto msg = notice_message(proto::auth_deadline_notice(std::chrono::seconds{15}));
  EXPECT_TRUE(starts_with(msg, "auth-required: ")) << msg;
  EXPECT_EQ(msg, "auth-required: no NIP-42 AUTH within 15 s of connecting, closing");
}

TEST(GatewayNotices, EvictionIsAuthRequired) {
  auto msg = notice_message(proto::unauthenticated_evicted_notice());
  EXPECT_TRUE(starts_with(msg, "auth-required: too many unauthenticated connections")) << msg;
}

TEST(SubmitReply, IsTheOkAsAnObject) {
  const std::string id(64, 'b');
  EXPECT_EQ(proto::render_submit_reply(id, true, ""),
            R"({"id":")" + id + R"(","accepted":true,"message":""})");
  EXPECT_EQ(proto::render_submit_reply(id, false, "invalid: bad \"sig\""),
            R"({"id":")" + id + R"(","accepted":false,"message":"invalid: bad \"sig\""})");
}

TEST(SubmitReply, WithoutAnIdHasNoIdField) {
  EXPECT_EQ(proto::render_submit_reply({}, false, "invalid: body larger than 65536 bytes"),
            R"({"accepted":false,"message":"invalid: body larger than 65536 bytes"})");
}

}  // namespace
}  // namespace waggle
