// Who may read /metrics (issue 13, finding 8): the decision on the peer's
// address, without sockets, so it is tested with addresses this machine
// need not have. Red check: on the base code there was no decision at all
// (every peer got 200).

#include <gtest/gtest.h>

#include "gateway/metrics_access.hpp"

namespace {

using namespace waggle::gateway;

TEST(MetricsAccess, LoopbackByDefault) {
  metrics_access d;
  for (auto ip : {"127.0.0.1", "127.1.2.3", "::1", "::ffff:127.0.0.1"})
    EXPECT_TRUE(metrics_allowed(d, ip)) << ip;
  for (auto ip : {"10.0.0.1", "192.0.2.7", "2001:db8::1", "::ffff:10.0.0.1", "", "nonsense"})
    EXPECT_FALSE(metrics_allowed(d, ip)) << ip;
  auto parsed = parse_metrics_allow("loopback");
  ASSERT_TRUE(parsed);
  EXPECT_EQ(parsed->allow, metrics_access::mode::loopback);
}

TEST(MetricsAccess, Any) {
  auto any = parse_metrics_allow("any");
  ASSERT_TRUE(any);
  for (auto ip : {"127.0.0.1", "10.0.0.1", "2001:db8::1", ""})
    EXPECT_TRUE(metrics_allowed(*any, ip)) << ip;
}

TEST(MetricsAccess, AList) {
  auto list = parse_metrics_allow(" 10.0.0.5, 2001:DB8::1 ,");
  ASSERT_TRUE(list);
  EXPECT_TRUE(metrics_allowed(*list, "10.0.0.5"));
  EXPECT_TRUE(metrics_allowed(*list, "::ffff:10.0.0.5"));  // as a dual-stack socket shows it
  EXPECT_TRUE(metrics_allowed(*list, "2001:db8:0::1"));    // the same address, written longer
  EXPECT_FALSE(metrics_allowed(*list, "10.0.0.6"));
  EXPECT_FALSE(metrics_allowed(*list, "127.0.0.1"));       // loopback only if listed
  EXPECT_FALSE(metrics_allowed(*list, ""));
}

TEST(MetricsAccess, BadSpecsAreRefused) {
  for (auto spec : {"", ",", "10.0.0.300", "10.0.0.0/8", "localhost", "loopback,10.0.0.1"})
    EXPECT_FALSE(parse_metrics_allow(spec)) << spec;
}

}  // namespace
