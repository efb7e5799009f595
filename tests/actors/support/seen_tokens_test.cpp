// The node's table of used NIP-98 tokens (actors/support/seen_tokens.hpp).

#include <gtest/gtest.h>

#include "actors/support/seen_tokens.hpp"

using waggle::seen_tokens;
using use = seen_tokens::use;

TEST(SeenTokens, ATokenIsGoodOnceUntilItExpires) {
  seen_tokens seen{10};
  EXPECT_EQ(seen.record("a", 160, 100), use::first);
  EXPECT_EQ(seen.record("a", 160, 101), use::replayed);
  EXPECT_EQ(seen.record("a", 160, 160), use::replayed);
  EXPECT_EQ(seen.record("b", 160, 101), use::first);
  // Past its expiry it could not pass verification; it is forgotten.
  EXPECT_EQ(seen.record("a", 300, 161), use::first);
}

TEST(SeenTokens, AFullTableOfLiveTokensRefusesRatherThanForgets) {
  seen_tokens seen{3};
  for (auto id : {"a", "b", "c"})
    EXPECT_EQ(seen.record(id, 200, 100), use::first);
  EXPECT_EQ(seen.record("d", 200, 100), use::full);
  EXPECT_EQ(seen.record("a", 200, 100), use::replayed);  // still remembered
  // Once they expire, room again.
  EXPECT_EQ(seen.record("d", 400, 201), use::first);
  EXPECT_EQ(seen.size(), 1u);
}
