// The one trim (messages/proto/text.hpp) every header, token and list item goes through.

#include <gtest/gtest.h>

#include "messages/proto/text.hpp"

namespace waggle {
namespace {

TEST(Trim, DropsSpacesAndTabsOnBothSidesOnly) {
  EXPECT_EQ(proto::trim(" \t 10.0.0.1 \t"), "10.0.0.1");
  EXPECT_EQ(proto::trim("Nostr abc"), "Nostr abc");
  EXPECT_EQ(proto::trim("a \t b"), "a \t b");
}

TEST(Trim, BlankIsEmpty) {
  EXPECT_EQ(proto::trim(""), "");
  EXPECT_EQ(proto::trim(" \t \t"), "");
}

// Line ends are not optional whitespace: a value carrying one stays visible to its parser.
TEST(Trim, KeepsLineEnds) { EXPECT_EQ(proto::trim(" x\r\n"), "x\r\n"); }

}  // namespace
}  // namespace waggle
