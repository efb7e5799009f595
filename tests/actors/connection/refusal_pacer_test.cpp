// The refusal pacer's arithmetic (actors/connection/refusal_pacer.hpp), on a
// made-up clock.

#include "actors/connection/refusal_pacer.hpp"

#include <gtest/gtest.h>

using namespace waggle;
using namespace std::chrono_literals;

namespace {

const refusal_pacing pace{10, 5, 2000ms};  // 10/s forgiven, burst 5, at most 2 s

}  // namespace

TEST(RefusalPacer, TheBurstIsFree) {
  refusal_pacer p;
  auto t = bucket_clock::time_point{} + 100s;
  for (int i = 0; i < 5; ++i)
    EXPECT_EQ(p.on_refusal(t, pace), 0ms) << i;
  EXPECT_NEAR(p.credit(t, pace), 0, 1e-9);
}

TEST(RefusalPacer, DebtPausesForTheTimeToPayIt) {
  refusal_pacer p;
  auto t = bucket_clock::time_point{} + 100s;
  for (int i = 0; i < 5; ++i)
    p.on_refusal(t, pace);
  // One refusal past the burst: a tenth of a second of debt.
  EXPECT_EQ(p.on_refusal(t, pace), 100ms);
  // The next ones within that pause ask again only once the debt outgrows it
  // by a tenth of a second (not on every frame).
  EXPECT_EQ(p.on_refusal(t, pace), 0ms);
  EXPECT_EQ(p.on_refusal(t, pace), 300ms);
}

TEST(RefusalPacer, DebtIsCappedAtTheLongestPause) {
  refusal_pacer p;
  auto t = bucket_clock::time_point{} + 100s;
  std::chrono::milliseconds longest{0};
  for (int i = 0; i < 1000; ++i)
    longest = std::max(longest, p.on_refusal(t, pace));
  // (Within the tenth of a second the pacer leaves to spare the session calls.)
  EXPECT_GE(longest, 1900ms);
  EXPECT_LE(longest, 2000ms);
  // Once the longest pause has passed the debt is paid: pacing starts over.
  EXPECT_NEAR(p.credit(t + 2s, pace), 0, 1e-9);
  EXPECT_NEAR(p.credit(t + 3s, pace), 5, 1e-9);
}

TEST(RefusalPacer, OffNeverPauses) {
  refusal_pacer p;
  auto t = bucket_clock::time_point{} + 100s;
  for (int i = 0; i < 1000; ++i)
    ASSERT_EQ(p.on_refusal(t, refusal_pacing{0, 5, 2000ms}), 0ms);
}

TEST(RefusalPacer, AFloodAfterAPauseEndedIsPausedAgainAtOnce) {
  refusal_pacer p;
  auto t = bucket_clock::time_point{} + 100s;
  for (int i = 0; i < 5; ++i)
    p.on_refusal(t, pace);
  ASSERT_EQ(p.on_refusal(t, pace), 100ms);  // paused until t + 100 ms
  // At its end the debt is paid with no credit left: the very next refusal
  // pauses again (the old pause's end must not excuse it).
  EXPECT_EQ(p.on_refusal(t + 100ms, pace), 100ms);
}

// What counts, by prefix (red-team findings 3 and 7).
TEST(RefusalPacer, AnAnswerCountsByItsPrefix) {
  for (auto* m : {"invalid: bad signature", "restricted: not a member", "blocked: banned",
                  "rate-limited: slow down", "pow: difficulty 20", "mute: no"})
    EXPECT_EQ(refusal_weight(m), 1) << m;
  EXPECT_DOUBLE_EQ(refusal_weight("auth-required: authenticate first"), 0.1);
  EXPECT_EQ(refusal_weight("error: query took too long"), 1);
  // Red-team findings 3 and 4 of the second review: a resent stored event
  // costs a verify; a large frame refused before AUTH was parsed whole.
  EXPECT_DOUBLE_EQ(refusal_weight("duplicate: already have this event"), 0.5);
  EXPECT_DOUBLE_EQ(refusal_weight("auth-required: authenticate first", 1000), 0.1);
  EXPECT_DOUBLE_EQ(refusal_weight("auth-required: authenticate first", 60 * 1024), 3.75);
  EXPECT_DOUBLE_EQ(refusal_weight("invalid: x", 60 * 1024), 1) << "only auth-required by size";
  for (auto* m : {"", "error: database unavailable",
                  "error: count failed", "error: relay is shutting down", "no prefix at all"})
    EXPECT_EQ(refusal_weight(m), 0) << m;
}

TEST(RefusalPacer, TenthsAddUpToOneRefusal) {
  refusal_pacer p;
  auto t = bucket_clock::time_point{} + 100s;
  // The burst of 5 in tenths: 50 of them are free, not one pauses.
  for (int i = 0; i < 50; ++i)
    ASSERT_EQ(p.on_refusal(t, pace, 0.1), 0ms) << i;
  EXPECT_EQ(p.on_refusal(t, pace, 1), 100ms);
  EXPECT_EQ(p.on_refusal(t, pace, 0), 0ms) << "weight 0 counts nothing";
}
