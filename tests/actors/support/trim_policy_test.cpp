// When freed heap is handed back (actors/support/trim_policy.hpp).

#include <gtest/gtest.h>

#include "actors/support/trim_policy.hpp"

namespace waggle {
namespace {

constexpr std::size_t MiB = 1u << 20;

TEST(TrimPolicy, MemoryFreedByAnythingIsTrimmedOnceItReachesTheThreshold) {
  trim_policy p{8 * MiB};
  // In use: the allocator holds little free, nothing was released.
  EXPECT_FALSE(p.should_trim(0, 2 * MiB));
  EXPECT_FALSE(p.should_trim(0, 1 * MiB));  // the low point
  // Connections closed: their queues and frames went back to the allocator
  // (no subscription bytes among them), 7 MiB above the low point...
  EXPECT_FALSE(p.should_trim(0, 8 * MiB));
  // ... then 9 MiB: worth a trim, twice (the hub frees after the connection).
  EXPECT_TRUE(p.should_trim(0, 10 * MiB));
  p.trimmed(10 * MiB);
  EXPECT_TRUE(p.should_trim(0, 10 * MiB));
  p.trimmed(10 * MiB);
  // Trimmed pages stay in the free lists: no trim for the same free bytes.
  EXPECT_FALSE(p.should_trim(0, 10 * MiB));
  EXPECT_FALSE(p.should_trim(0, 12 * MiB));
}

TEST(TrimPolicy, MemoryReusedAndFreedAgainIsTrimmedAgain) {
  trim_policy p{8 * MiB};
  p.should_trim(0, 1 * MiB);
  EXPECT_TRUE(p.should_trim(0, 20 * MiB));
  p.trimmed(20 * MiB);
  p.should_trim(0, 20 * MiB);
  // A new attack takes the free memory back into use (pages touched again)...
  EXPECT_FALSE(p.should_trim(0, 3 * MiB));
  // ... and frees it when it ends.
  EXPECT_TRUE(p.should_trim(0, 19 * MiB));
}

TEST(TrimPolicy, ReleasedSubscriptionStateTrimsWhateverTheFreeListsSay) {
  trim_policy p{8 * MiB};
  EXPECT_FALSE(p.should_trim(4 * MiB, 0));
  EXPECT_TRUE(p.should_trim(8 * MiB, 0));
  EXPECT_TRUE(p.should_trim(0, 0));  // the second look of that release
  EXPECT_FALSE(p.should_trim(0, 0));
}

}  // namespace
}  // namespace waggle
