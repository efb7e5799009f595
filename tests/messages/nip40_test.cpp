#include "messages/proto/nip40.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

using namespace waggle;
using namespace waggle::proto;

namespace {

event with_tags(std::vector<tag> tags) {
  event ev;
  ev.kind = 1;
  ev.tags = std::move(tags);
  return ev;
}

// The parsed value, or the reason it was refused.
std::string read(const std::vector<tag>& tags) {
  auto r = expiration_of(with_tags(tags));
  if (!r)
    return "invalid: " + r.error().reason;
  return *r ? std::to_string(**r) : "none";
}

}  // namespace

TEST(Nip40, NoExpirationTagMeansNever) {
  EXPECT_EQ(read({}), "none");
  EXPECT_EQ(read({{"e", "00"}, {"expirationx", "5"}, {"Expiration", "5"}}), "none");
  EXPECT_FALSE(has_expiration_tag(with_tags({{"p", "expiration"}})));
}

TEST(Nip40, ReadsUnixSeconds) {
  EXPECT_EQ(read({{"expiration", "1700000000"}}), "1700000000");
  EXPECT_EQ(read({{"expiration", "0"}}), "0");
  EXPECT_EQ(read({{"expiration", "0001700000000"}}), "1700000000");  // leading zeros are decimal
  EXPECT_EQ(read({{"expiration", "9223372036854775807"}}), "9223372036854775807");
  EXPECT_EQ(read({{"expiration", "12", "extra values are ignored"}}), "12");
  EXPECT_TRUE(has_expiration_tag(with_tags({{"t", "x"}, {"expiration", "12"}})));
}

TEST(Nip40, OnlyTheFirstExpirationTagCounts) {
  EXPECT_EQ(read({{"expiration", "10"}, {"expiration", "20"}}), "10");
  // A malformed first tag is not rescued by a good second one.
  EXPECT_EQ(read({{"expiration", "x"}, {"expiration", "20"}}).rfind("invalid:", 0), 0u);
  // A good first tag is not spoiled by a malformed second one.
  EXPECT_EQ(read({{"expiration", "10"}, {"expiration", "-1"}}), "10");
}

TEST(Nip40, MalformedValuesAreInvalid) {
  for (std::vector<tag> tags : std::vector<std::vector<tag>>{
         {{"expiration"}},
         {{"expiration", ""}},
         {{"expiration", "-1"}},
         {{"expiration", "+5"}},
         {{"expiration", " 5"}},
         {{"expiration", "5 "}},
         {{"expiration", "1.5"}},
         {{"expiration", "1e9"}},
         {{"expiration", "0x10"}},
         {{"expiration", "9223372036854775808"}},  // one past int64
         {{"expiration", "99999999999999999999999"}},
       }) {
    auto r = expiration_of(with_tags(tags));
    ASSERT_FALSE(r) << (tags[0].size() > 1 ? tags[0][1] : "(no value)");
    EXPECT_EQ(r.error().code, ec::invalid);
  }
}

TEST(Nip40, TheExpirationSecondItselfIsExpired) {
  EXPECT_FALSE(has_expired(std::nullopt, 1000));
  EXPECT_FALSE(has_expired(1001, 1000));
  EXPECT_TRUE(has_expired(1000, 1000));
  EXPECT_TRUE(has_expired(999, 1000));
}
