// Where an actor takes a message from inside the node is an order point of the trace when
// it decides which of two independent inputs the actor's output follows (docs/traces.md,
// "The schedule"). Two of them, each found by the `trace-replay` stage of ./scripts/test
// failing now and then:
// - a connection takes ingest's answer (its `reply_in` of an ingest_reply): the COMMIT that
//   answers also wakes the delivery supervisor, whose input was recorded between ingest's
//   reply and the connection's OK;
// - a roster actor takes a change from the group actor (its `input` roster_dirty): live, the
//   group's next command could reach the group session before the publication it set off.
// Each test puts another actor's input just before the order point and replays strictly: in
// time. The same edit on the trace without the order point's record (as the recorder wrote it
// before) is a divergence, which is what the stage saw.

#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "tests/actors/replay/trace_lines.hpp"

namespace waggle {
namespace {

using testing::find_line;
using testing::read_lines;
using testing::renumbered;
using testing::replay_lines;
using testing::traces_dir;

// An input of another actor that changes nothing: ingest's commit-delay timer with nothing
// queued.
const std::string foreign_input
  = R"({"seq":0,"actor":"ingest","kind":"timer","type":"ingest_tick","msg":[]})";

std::vector<std::string> with_foreign_input_at(std::vector<std::string> lines, size_t at) {
  lines.insert(lines.begin() + static_cast<std::ptrdiff_t>(at), foreign_input);
  return renumbered(std::move(lines));
}

std::vector<std::string> without(std::vector<std::string> lines, const std::string& a,
                                  const std::string& b) {
  std::erase_if(lines, [&](const std::string& l) {
    return l.find(a) != std::string::npos && l.find(b) != std::string::npos;
  });
  return renumbered(std::move(lines));
}

TEST(TraceOrderPointsTest, AnInputBeforeAConnectionTakesIngestsAnswerLeavesItsOkInTime) {
  auto lines = read_lines(traces_dir() / "listener-retry.jsonl");
  ASSERT_TRUE(replay_lines(lines, {.strict = true}).identical);
  const std::string taken = R"("kind":"reply_in","type":"ingest_reply")";
  auto at = find_line(lines, {taken, R"("actor":"conn-1")"});
  ASSERT_GT(at, 0u);
  ASSERT_NE(lines[at + 1].find(R"("kind":"frame_out","text":"[\"OK\")"), std::string::npos)
    << "the OK follows the answer in its section";

  auto out = replay_lines(with_foreign_input_at(lines, at), {.strict = true});
  EXPECT_TRUE(out.identical) << out.summary();

  // Without the order point the connection takes the answer as ingest gives it.
  auto old = without(lines, taken, R"("from":"ingest")");
  auto old_ok = find_line(old, {R"("kind":"frame_out","text":"[\"OK\")", R"("actor":"conn-1")"},
                          find_line(old, {R"("kind":"reply_in","type":"write_batch_reply")"}));
  ASSERT_TRUE(replay_lines(old, {.strict = true}).identical);
  auto red = replay_lines(with_foreign_input_at(old, old_ok), {.strict = true});
  ASSERT_TRUE(red.divergence) << red.summary();
  EXPECT_NE(red.divergence->replayed.find("too early"), std::string::npos) << red.summary();
}

TEST(TraceOrderPointsTest, AnInputBeforeARosterActorTakesAChangeLeavesItsPublicationInTime) {
  auto lines = read_lines(traces_dir() / "roster-race.jsonl");
  ASSERT_TRUE(replay_lines(lines, {.strict = true}).identical);
  const std::string taken = R"("kind":"input","type":"roster_dirty")";
  auto at = find_line(lines, {taken});
  ASSERT_GT(at, 0u);
  ASSERT_NE(lines[at + 1].find(R"("kind":"reading","what":"unix_now")"), std::string::npos)
    << "the roster actor reads the clock for its publication in the same section";

  auto out = replay_lines(with_foreign_input_at(lines, at), {.strict = true});
  EXPECT_TRUE(out.identical) << out.summary();

  // Without the order point the roster actor takes the change as the group sends it.
  auto old = without(lines, taken, "roster");
  ASSERT_TRUE(replay_lines(old, {.strict = true}).identical);
  auto red = replay_lines(with_foreign_input_at(old, at), {.strict = true});
  ASSERT_TRUE(red.divergence) << red.summary();
  EXPECT_NE(red.divergence->replayed.find("too early"), std::string::npos) << red.summary();
}

}  // namespace
}  // namespace waggle
