// The cluster in a trace (docs/traces.md, "The cluster"): the committed
// two-node story, cluster-a.jsonl and cluster-b.jsonl, recorded from two
// `waggle serve --bus postgres` processes over one database
// (./scripts/record-traces cluster). What each node's hub took from its
// cluster tail and relay is an input of its trace, what it sent the relay an
// output, the other nodes' answer to a barrier an input; a replay runs the
// clustered hub over a stand-in relay. Each edit below leaves a recorded
// cluster input out (or changes it), and the replay goes red where the live
// node's clients saw its effect.

#include <string>
#include <vector>

#include "actors/replay/trace_replay.hpp"
#include "tests/actors/replay/trace_lines.hpp"

namespace waggle {
namespace {

using testing::find_line;
using testing::read_lines;
using testing::replay_lines;
using testing::traces_dir;

std::vector<std::string> node_a() { return read_lines(traces_dir() / "cluster-a.jsonl"); }
std::vector<std::string> node_b() { return read_lines(traces_dir() / "cluster-b.jsonl"); }

// Records of the hub's cluster boundary (the message JSON is escaped in a record).
const std::string post = "hello from A";
const std::string wave = "waves from A";
const std::string removal = "\\\"kind\\\":9001";

void erase(std::vector<std::string>& lines, size_t i) {
  ASSERT_GT(i, 0u);
  lines.erase(lines.begin() + static_cast<std::ptrdiff_t>(i));
}

TEST(ClusterTraceTest, NodeAHoldsTheDoorbellItsOwnCopyAndAConfirmedBarrier) {
  auto a = node_a();
  ASSERT_GT(a.size(), 20u);
  EXPECT_NE(a[0].find("\"bus\":\"postgres\""), std::string::npos);
  EXPECT_NE(a[0].find("\"bus_node_id\":\"reca\""), std::string::npos);
  auto sent = find_line(a, {"\"frame_in\"", post});
  // The commit rang the other nodes' doorbell; A's tail brought the post back
  // (the copy the clustered hub drops: alice's one EVENT is its local fanout).
  EXPECT_GT(find_line(a, {"\"hub\",\"kind\":\"cluster_out\"", "cluster_local_commit"}, sent), sent);
  EXPECT_GT(find_line(a, {"\"hub\",\"kind\":\"input\"", "cluster_committed", post}, sent), sent);
  size_t events = 0;
  for (auto& l : a)
    events += l.find("\"frame_out\",\"text\":\"[\\\"EVENT\\\",\\\"mine\\\"") != std::string::npos;
  EXPECT_EQ(events, 1u);
  // The ephemeral event went out whole; the removal waited for the barrier,
  // which B confirmed, and only then was alice told OK.
  find_line(a, {"\"hub\",\"kind\":\"cluster_out\"", "cluster_local_ephemeral", wave});
  auto removed = find_line(a, {"\"frame_in\"", removal});
  auto barrier = find_line(a, {"\"hub\",\"kind\":\"cluster_out\"", "\"type\":\"cluster_barrier\""}, removed);
  auto answer = find_line(a, {"\"hub\",\"kind\":\"cluster_reply\"", "\"msg\":[1,[]]"}, barrier);
  auto ok = find_line(a, {"\"frame_out\"", "[\\\"OK\\\"", ",true,\\\"\\\"]"}, removed);
  EXPECT_GT(ok, answer);
  auto out = replay_lines(a, {.strict = true});
  EXPECT_TRUE(out.identical) << out.summary();
}

TEST(ClusterTraceTest, NodeBHoldsThePostTheEphemeralEventAndTheRevocationFromTheCluster) {
  auto b = node_b();
  ASSERT_GT(b.size(), 20u);
  EXPECT_NE(b[0].find("\"bus\":\"postgres\""), std::string::npos);
  auto in = find_line(b, {"\"hub\",\"kind\":\"input\"", "cluster_committed", post});
  EXPECT_GT(find_line(b, {"\"frame_out\"", "[\\\"EVENT\\\",\\\"live\\\"", post}, in), in);
  auto eph = find_line(b, {"\"hub\",\"kind\":\"input\"", "cluster_ephemeral", wave});
  EXPECT_GT(find_line(b, {"\"frame_out\"", "[\\\"EVENT\\\",\\\"eph\\\"", wave}, eph), eph);
  // The removal came through B's tail, then B answered A's barrier (the sync).
  auto gone = find_line(b, {"\"hub\",\"kind\":\"input\"", "cluster_committed", removal});
  auto closed = find_line(b, {"\"frame_out\"", "[\\\"CLOSED\\\",\\\"live\\\",\\\"restricted:"}, gone);
  EXPECT_GT(closed, gone);
  EXPECT_GT(find_line(b, {"\"hub\",\"kind\":\"input\"", "cluster_sync"}, gone), gone);
  auto out = replay_lines(b, {.strict = true});
  EXPECT_TRUE(out.identical) << out.summary();
}

// A header without the bus: the replay runs the single-node hub, which has no
// relay, and stops at the first thing the live one sent it.
TEST(ClusterTraceTest, ANodeReplayedAsNotClusteredDiverges) {
  auto a = node_a();
  auto at = a[0].find(",\"bus\":\"postgres\"");
  ASSERT_NE(at, std::string::npos);
  a[0].erase(at, std::string{",\"bus\":\"postgres\""}.size());
  auto out = replay_lines(a, {.strict = true});
  ASSERT_TRUE(out.divergence) << out.summary();
  EXPECT_EQ(out.divergence->actor, "hub");
  EXPECT_EQ(out.divergence->kind, "cluster_out");
}

// Each of B's cluster inputs left out: what it caused on bob's socket is missing.
TEST(ClusterTraceTest, ACommittedPageLeftOutIsADivergenceAtTheSubscribersFrame) {
  for (auto [what, sub] : {std::pair{post, "live"}, std::pair{removal, "live"}}) {
    auto b = node_b();
    erase(b, find_line(b, {"\"hub\",\"kind\":\"input\"", "cluster_committed", what}));
    auto out = replay_lines(b, {.strict = true});
    ASSERT_TRUE(out.divergence) << what << ": " << out.summary();
    EXPECT_EQ(out.divergence->actor, "conn-1") << what;
    EXPECT_EQ(out.divergence->kind, "frame_out") << what;
    EXPECT_NE(out.divergence->recorded.find(sub), std::string::npos) << out.summary();
    EXPECT_EQ(out.divergence->replayed, "(no frame)") << out.summary();
  }
}

TEST(ClusterTraceTest, AnEphemeralEventLeftOutIsADivergenceAtTheSubscribersFrame) {
  auto b = node_b();
  erase(b, find_line(b, {"\"hub\",\"kind\":\"input\"", "cluster_ephemeral"}));
  auto out = replay_lines(b, {.strict = true});
  ASSERT_TRUE(out.divergence) << out.summary();
  EXPECT_EQ(out.divergence->kind, "frame_out");
  EXPECT_NE(out.divergence->recorded.find(wave), std::string::npos) << out.summary();
}

// The barrier's answer decides the removal's OK: with B unconfirmed in the
// trace, the replayed group actor names it, where the live one did not.
TEST(ClusterTraceTest, AnotherBarrierAnswerIsADivergenceAtTheRemovalsOk) {
  auto a = node_a();
  auto i = find_line(a, {"\"hub\",\"kind\":\"cluster_reply\"", "\"msg\":[1,[]]"});
  ASSERT_GT(i, 0u);
  auto at = a[i].find("\"msg\":[1,[]]");
  a[i].replace(at, std::string{"\"msg\":[1,[]]"}.size(), "\"msg\":[0,[\"recb\"]]");
  auto out = replay_lines(a, {.strict = true});
  ASSERT_TRUE(out.divergence) << out.summary();
  EXPECT_EQ(out.divergence->kind, "frame_out");
  EXPECT_NE(out.divergence->replayed.find("recb"), std::string::npos) << out.summary();
}

// The answer must be to a request the replayed hub made: a cluster_reply
// for a number it never sent is a divergence, not a stray input.
TEST(ClusterTraceTest, ABarrierAnswerWithoutItsRequestIsADivergence) {
  auto a = node_a();
  erase(a, find_line(a, {"\"hub\",\"kind\":\"cluster_out\"", "\"type\":\"cluster_barrier\""}));
  auto out = replay_lines(a, {.strict = true});
  ASSERT_TRUE(out.divergence) << out.summary();
  EXPECT_EQ(out.divergence->actor, "hub");
}

}  // namespace
}  // namespace waggle
