// When freed heap is handed back (actors/support/trim_policy.hpp).

#include <vector>

#include <gtest/gtest.h>

#include "actors/support/trim_policy.hpp"

namespace waggle {
namespace {

constexpr std::size_t MiB = 1u << 20;

// The looks that trim in a row, given the same free bytes each time.
int trims_in_a_row(trim_policy& p, std::size_t free_held) {
  int n = 0;
  while (p.should_trim(0, free_held)) {
    p.trimmed(free_held);
    ++n;
  }
  return n;
}

TEST(TrimPolicy, MemoryFreedByAnythingIsTrimmedOnceItReachesTheThreshold) {
  trim_policy p{4 * MiB};
  // In use: the allocator holds little free, nothing was released.
  EXPECT_FALSE(p.should_trim(0, 2 * MiB));
  EXPECT_FALSE(p.should_trim(0, 1 * MiB));  // the low point
  // Connections closed: their queues and frames went back to the allocator
  // (no subscription bytes among them), 3 MiB above the low point...
  EXPECT_FALSE(p.should_trim(0, 4 * MiB));
  // ... then 5 MiB: worth a trim, and on the next looks too, as the rest
  // of it is freed.
  EXPECT_TRUE(p.should_trim(0, 6 * MiB));
  p.trimmed(6 * MiB);
  EXPECT_EQ(trims_in_a_row(p, 6 * MiB), trim_policy::looks_per_trim - 1);
  // Trimmed pages stay in the free lists: no trim for the same free bytes.
  EXPECT_FALSE(p.should_trim(0, 6 * MiB));
  EXPECT_FALSE(p.should_trim(0, 9 * MiB));
}

TEST(TrimPolicy, MemoryReusedAndFreedAgainIsTrimmedAgain) {
  trim_policy p{4 * MiB};
  p.should_trim(0, 1 * MiB);
  EXPECT_EQ(trims_in_a_row(p, 20 * MiB), trim_policy::looks_per_trim);
  // A new attack takes the free memory back into use (pages touched again)...
  EXPECT_FALSE(p.should_trim(0, 3 * MiB));
  // ... and frees it when it ends.
  EXPECT_TRUE(p.should_trim(0, 19 * MiB));
}

TEST(TrimPolicy, ReleasedSubscriptionStateTrimsWhateverTheFreeListsSay) {
  trim_policy p{4 * MiB};
  EXPECT_FALSE(p.should_trim(3 * MiB, 0));
  EXPECT_EQ(trims_in_a_row(p, 0), 0);
  EXPECT_TRUE(p.should_trim(4 * MiB, 0));
  EXPECT_EQ(trims_in_a_row(p, 0), trim_policy::looks_per_trim - 1);
}

}  // namespace
}  // namespace waggle

namespace waggle {
namespace {

TEST(TrimPolicy, WhatIsFreedSlowlyIsTrimmedEveryTenLooks) {
  trim_policy p{4 * MiB};
  p.should_trim(0, 1 * MiB);
  EXPECT_EQ(trims_in_a_row(p, 20 * MiB), trim_policy::looks_per_trim);
  // Freed a little at a time, never 4 MiB above the last trim's low point.
  std::vector<int> trimmed_at;
  for (int look = 1; look <= 30; ++look)
    if (p.should_trim(0, 20 * MiB + static_cast<std::size_t>(look) * 64 * 1024)) {
      p.trimmed(20 * MiB + static_cast<std::size_t>(look) * 64 * 1024);
      trimmed_at.push_back(look);
    }
  ASSERT_EQ(trimmed_at.size(), 3u);
  EXPECT_EQ(trimmed_at[1] - trimmed_at[0], trim_policy::looks_per_idle_trim);
  EXPECT_EQ(trimmed_at[2] - trimmed_at[1], trim_policy::looks_per_idle_trim);
  // Holding little free, an idle node is never trimmed.
  trim_policy idle{4 * MiB};
  for (int look = 0; look < 30; ++look)
    EXPECT_FALSE(idle.should_trim(0, 1 * MiB));
}

}  // namespace
}  // namespace waggle
