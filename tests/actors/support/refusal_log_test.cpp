// Refusals are logged, but a flood of them is not a flood of log lines
// (docs/operations.md, "Refusal reasons"): the first refusal of a reason
// writes a line at once, later ones within the second only add to the count
// the reason's next line carries.

#include <gtest/gtest.h>

#include <string>

#include "actors/support/metrics.hpp"

namespace waggle {
namespace {

size_t lines_with(const std::string& text, const std::string& needle) {
  size_t n = 0;
  for (auto at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1))
    ++n;
  return n;
}

TEST(RefusalLog, AFloodOfRefusalsWritesALineAtOnceAndNotOneEach) {
  metrics stats;
  ::testing::internal::CaptureStderr();
  for (int i = 0; i < 500; ++i) {
    stats.count_refused("host_unknown");
    stats.count_refused("nip98");
  }
  auto out = ::testing::internal::GetCapturedStderr();
  auto unknown = lines_with(out, "reason=host_unknown");
  EXPECT_GE(unknown, 1u) << "the first refusal is logged at once";
  EXPECT_LE(unknown, 2u) << out.substr(0, 2000);  // 500 in well under a second (2: a stall)
  EXPECT_GE(lines_with(out, "reason=nip98"), 1u) << "each reason has its own line";
  EXPECT_NE(out.find("reason=host_unknown count=1"), std::string::npos) << out.substr(0, 500);
  EXPECT_NE(stats.render().find("waggle_refusals_total{reason=\"host_unknown\"} 500"),
            std::string::npos)
    << "the counter counts every one";
}

}  // namespace
}  // namespace waggle
