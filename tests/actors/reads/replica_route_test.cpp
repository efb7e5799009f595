// The routing decisions and the heartbeat ring, without a database
// (docs/replicas.md, "Routing"). The replica itself is exercised by
// tests/e2e/replica_*_e2e_test.cpp against the streaming standby.

#include <gtest/gtest.h>

#include "actors/reads/heartbeat_ring.hpp"
#include "actors/reads/replica_route.hpp"
#include "db/replica_pool.hpp"

namespace waggle {
namespace {

using namespace std::chrono_literals;
using clock = ring_entry::clock;

const clock::time_point t0 = clock::time_point{} + std::chrono::hours(1000);

ring_entry entry(int64_t token, double fence_raw, clock::time_point sampled) {
  return ring_entry{token, fence_raw, 960, sampled};
}

read_shape covered_read(int64_t until) {
  read_shape s;
  s.upper = until;
  return s;
}

TEST(HeartbeatRing, ProofIsTheGreatestEntryAtOrBelowTheToken) {
  heartbeat_ring ring;
  ring.push("e1", entry(10, 1000, t0));
  ring.push("e1", entry(12, 1001, t0 + 500ms));
  ring.push("e1", entry(15, 1002, t0 + 1s));
  auto snap = ring.snapshot();
  EXPECT_EQ(snap->proof_for(9), nullptr);
  EXPECT_EQ(snap->proof_for(10)->token, 10);
  EXPECT_EQ(snap->proof_for(14)->token, 12);
  EXPECT_EQ(snap->proof_for(99)->token, 15);
}

TEST(HeartbeatRing, ANewEpochClearsTheRing) {
  heartbeat_ring ring;
  ring.push("e1", entry(10, 1000, t0));
  EXPECT_EQ(ring.push("e2", entry(3, 1001, t0 + 500ms)), heartbeat_ring::push_result::epoch_changed);
  auto snap = ring.snapshot();
  ASSERT_EQ(snap->entries.size(), 1u);
  EXPECT_EQ(snap->epoch, "e2");
  EXPECT_EQ(snap->entries[0].token, 3);
}

TEST(HeartbeatRing, ATokenRegressionInTheSameEpochEmptiesTheRing) {
  heartbeat_ring ring;
  ring.push("e1", entry(10, 1000, t0));
  ring.push("e1", entry(11, 1000, t0 + 500ms));
  EXPECT_EQ(ring.push("e1", entry(11, 1001, t0 + 1s)), heartbeat_ring::push_result::regression);
  EXPECT_TRUE(ring.snapshot()->entries.empty());
}

TEST(HeartbeatRing, EntriesOlderThanTheWindowGo) {
  heartbeat_ring ring{std::chrono::seconds(60)};
  ring.push("e1", entry(1, 1000, t0));
  ring.push("e1", entry(2, 1030, t0 + 30s));
  ring.push("e1", entry(3, 1061, t0 + 61s));
  auto snap = ring.snapshot();
  ASSERT_EQ(snap->entries.size(), 2u);
  EXPECT_EQ(snap->entries.front().token, 2);
}

class RouteDecision : public ::testing::Test {
 protected:
  RouteDecision() {
    settings.stale_after = 5s;
    // fence_raw 10,000: the fence wall is 10,000 - 960 = 9,040.
    ring.epoch = "e1";
    ring.entries = {entry(5, 9'000, t0 - 3s), entry(7, 10'000, t0 - 1s)};
  }
  ring_snapshot ring;
  route_settings settings;
  db::heartbeat_seen seen(int64_t token, std::string epoch = "e1", int schema = 0) {
    return db::heartbeat_seen{token, std::move(epoch), schema};
  }
};

TEST_F(RouteDecision, NoReaderIsDisabled) {
  auto d = precheck(false, ring, covered_read(1), settings, t0, std::nullopt);
  EXPECT_EQ(d, (route_decision{false, route_reason::disabled}));
}

TEST_F(RouteDecision, AnEmptyOrStaleRingIsUninitialized) {
  ring_snapshot empty;
  EXPECT_EQ(precheck(true, empty, covered_read(1), settings, t0, std::nullopt),
            (route_decision{false, route_reason::uninitialized}));
  EXPECT_EQ(precheck(true, ring, covered_read(1), settings, t0 + 5s, std::nullopt),
            (route_decision{false, route_reason::uninitialized}));
}

TEST_F(RouteDecision, APageBelowTheFenceWallIsTriedAndCovered) {
  EXPECT_EQ(precheck(true, ring, covered_read(9'039), settings, t0, std::nullopt), std::nullopt);
  auto s = seen(7);
  EXPECT_EQ(judge(ring, &s, covered_read(9'039), settings, t0, std::nullopt),
            (route_decision{true, route_reason::covered}));
}

TEST_F(RouteDecision, APageAtTheFenceWallIsStale) {
  // created_at == until may equal the wall: only rows strictly below it are proved.
  EXPECT_EQ(precheck(true, ring, covered_read(9'040), settings, t0, std::nullopt),
            (route_decision{false, route_reason::stale}));
}

TEST_F(RouteDecision, AReplicaBehindGetsTheOlderProof) {
  // Token 6 is proved by entry 5 (wall 8,040): enough for 8,000, not for 9,000.
  auto s = seen(6);
  EXPECT_EQ(judge(ring, &s, covered_read(8'000), settings, t0, std::nullopt),
            (route_decision{true, route_reason::covered}));
  EXPECT_EQ(judge(ring, &s, covered_read(9'000), settings, t0, std::nullopt),
            (route_decision{false, route_reason::stale}));
}

TEST_F(RouteDecision, AReplicaBehindTheRingIsTokenBehind) {
  auto s = seen(4);
  EXPECT_EQ(judge(ring, &s, covered_read(1), settings, t0, std::nullopt),
            (route_decision{false, route_reason::reader_token_behind}));
}

TEST_F(RouteDecision, AnotherEpochOrAnOlderSchemaOrNoRowIsAValidationError) {
  auto other = seen(7, "e0");
  settings.schema_version = 11;
  auto old_schema = seen(7, "e1", 10);
  auto fine = seen(7, "e1", 11);
  auto bad = route_decision{false, route_reason::reader_validation_error};
  EXPECT_EQ(judge(ring, &other, covered_read(1), settings, t0, std::nullopt), bad);
  EXPECT_EQ(judge(ring, &old_schema, covered_read(1), settings, t0, std::nullopt), bad);
  EXPECT_EQ(judge(ring, nullptr, covered_read(1), settings, t0, std::nullopt), bad);
  EXPECT_EQ(judge(ring, &fine, covered_read(1), settings, t0, std::nullopt),
            (route_decision{true, route_reason::covered}));
}

TEST_F(RouteDecision, ALateInsertAfterTheSampleKeepsCoveredReadsOnTheWriter) {
  // Entry 7 sampled at fence_raw 10,000; a late row inserted at 10,000.5 is
  // not proved by it, one inserted at 9,999 is.
  auto s = seen(7);
  EXPECT_EQ(precheck(true, ring, covered_read(100), settings, t0, 10'000.5),
            (route_decision{false, route_reason::stale}));
  EXPECT_EQ(judge(ring, &s, covered_read(100), settings, t0, 10'000.5),
            (route_decision{false, route_reason::stale}));
  EXPECT_EQ(judge(ring, &s, covered_read(100), settings, t0, 9'999.0),
            (route_decision{true, route_reason::covered}));
}

TEST_F(RouteDecision, AHeadReadWithBoundedReadsOffIsDisabled) {
  EXPECT_EQ(precheck(true, ring, read_shape{}, settings, t0, std::nullopt),
            (route_decision{false, route_reason::disabled}));
}

TEST_F(RouteDecision, AHeadReadWithinTheMaxAgeIsBounded) {
  settings.max_age = 2s;
  auto s7 = seen(7);
  auto s5 = seen(5);
  EXPECT_EQ(precheck(true, ring, read_shape{}, settings, t0, std::nullopt), std::nullopt);
  EXPECT_EQ(judge(ring, &s7, read_shape{}, settings, t0, std::nullopt),
            (route_decision{true, route_reason::bounded}));
  // Entry 5 was sampled 3 s ago: too old.
  EXPECT_EQ(judge(ring, &s5, read_shape{}, settings, t0, std::nullopt),
            (route_decision{false, route_reason::stale}));
}

TEST_F(RouteDecision, ABoundedReadIsNeverProvedBeforeTheCallersOwnLastWrite) {
  settings.max_age = 10s;
  read_shape after_write;
  after_write.read_after = t0 - 500ms;  // after entry 7 was sampled
  auto s7 = seen(7);
  EXPECT_EQ(precheck(true, ring, after_write, settings, t0, std::nullopt),
            (route_decision{false, route_reason::stale}));
  EXPECT_EQ(judge(ring, &s7, after_write, settings, t0, std::nullopt),
            (route_decision{false, route_reason::stale}));
}

TEST(RouteShape, TheUpperBoundIsTheGreatestUntilOrTheHorizon) {
  proto::filter a, b;
  a.until = 100;
  b.until = 200;
  EXPECT_EQ(shape_of({a, b}, nullptr, {}).upper, std::optional<int64_t>{200});
  b.until.reset();
  EXPECT_EQ(shape_of({a, b}, nullptr, {}).upper, std::nullopt);  // a head read
  history_page page;
  page.started = true;
  page.horizon_created_at = 50;
  EXPECT_EQ(shape_of({a, b}, &page, {}).upper, std::optional<int64_t>{50});
  a.until = 10;
  b.until = 20;
  EXPECT_EQ(shape_of({a, b}, &page, {}).upper, std::optional<int64_t>{20});
}

// Issue 34 (two hostile communities holding every replica connection): one
// replica of 4 connections, the node's defaults (a share of 2, a reserve of
// 2). Two communities with reads piling up hold 3 connections between them;
// the last is kept for a community reading nothing, and a third community
// gets it. Red without the reserve: B's second read takes it.
TEST(ReplicaShares, TwoBusyCommunitiesLeaveAConnectionToAThird) {
  db::replica_pool_options o;
  o.url = "postgresql://127.0.0.1:1/never-opened";  // lazy: the shares never connect
  o.max_connections = 4;
  replica_set set;
  set.pools.push_back(std::make_shared<db::replica_pool>(o));
  set.max_leases_per_community = 2;
  set.reserved_connections = 2;
  using share = replica_set::share;
  const int64_t a = 1, b = 2, c = 3, d = 4;
  EXPECT_EQ(set.take_share(a), share::taken);
  EXPECT_EQ(set.take_share(a), share::taken);
  EXPECT_EQ(set.take_share(a), share::community_full);
  EXPECT_EQ(set.take_share(b), share::taken);
  EXPECT_EQ(set.take_share(b), share::reserved) << "it would leave one free, the reserve is 2";
  EXPECT_EQ(set.take_share(c), share::taken) << "a community reading nothing gets the reserve";
  EXPECT_EQ(set.take_share(d), share::taken) << "the share counts places, the pool may make it wait";
  set.give_share(d);
  set.give_share(c);
  set.give_share(a);
  EXPECT_EQ(set.take_share(b), share::reserved) << "A and B hold one each: two stay free";
  set.give_share(a);
  EXPECT_EQ(set.take_share(b), share::taken) << "with A done, B may take its second";
  EXPECT_EQ(set.take_share(a), share::taken);
  EXPECT_EQ(set.take_share(a), share::reserved);
}

}  // namespace
}  // namespace waggle
