// The delivery actors in traces (docs/traces.md, "Delivery"): the committed
// listener-retry trace holds the story wake -> claim -> POST -> 503 -> retry
// scheduled -> claim when due -> POST -> 200 -> delivered, it replays through
// the real supervisor and slots, and a trace whose listener answered
// otherwise, or whose slot posted something else, diverges where it shows.

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <rapidjson/document.h>

#include "actors/replay/trace_replay.hpp"
#include "tests/actors/replay/trace_lines.hpp"

namespace waggle {
namespace {

namespace fs = std::filesystem;

const fs::path trace_file = testing::traces_dir() / "listener-retry.jsonl";

std::vector<std::string> read_lines() { return testing::read_lines(trace_file); }

replay_outcome replay_lines(const std::vector<std::string>& lines) {
  return testing::replay_lines(lines, {.strict = true});
}

rapidjson::Document parse(const std::string& line) {
  rapidjson::Document doc;
  doc.Parse(line.c_str());
  return doc;
}

bool is(const rapidjson::Value& d, const char* key, const std::string& value) {
  return d.HasMember(key) && d[key].IsString() && value == d[key].GetString();
}

bool is_slot(const rapidjson::Value& d) {
  return d.HasMember("actor") && d["actor"].IsString()
         && std::string{d["actor"].GetString()}.rfind("operator_listener-slot-", 0) == 0;
}

// The trace as the steps of the story: what the delivery actors took and did.
std::vector<std::string> story(const std::vector<std::string>& lines) {
  std::vector<std::string> steps;
  for (size_t i = 1; i < lines.size(); ++i) {
    auto d = parse(lines[i]);
    if (!d.IsObject() || !d.HasMember("msg"))
      continue;
    auto& msg = d["msg"];
    if (is(d, "actor", "delivery_supervisor") && is(d, "type", "delivery_wake"))
      steps.push_back("wake");
    else if (is(d, "kind", "db_reply") && is(d, "type", "delivery_claim_reply")) {
      // [jobs, next_due_ms, failed]
      if (msg[0].Size() > 0)
        steps.push_back("claimed attempt " + std::to_string(msg[0][0][7].GetInt()));
      else if (msg[1].GetInt64() >= 0)
        steps.push_back("nothing due yet");
    } else if (is(d, "kind", "post_out") && is_slot(d))
      steps.push_back("POST");
    else if (is(d, "type", "delivery_response_in") && is_slot(d))
      steps.push_back("answer " + std::to_string(msg[0][0].GetInt()));
    else if (is(d, "kind", "db_request") && is(d, "type", "delivery_complete_request"))
      // [job, verdict, retry_after_ms]: verdict 0 delivered, 1 retry.
      steps.push_back(msg[1].GetInt() == 0 ? "delivered"
                                           : "retry in " + std::to_string(msg[2].GetInt64()) + " ms");
  }
  return steps;
}

// `want` appears in `steps` in this order (other steps may come between).
bool in_order(const std::vector<std::string>& steps, const std::vector<std::string>& want) {
  size_t k = 0;
  for (auto& s : steps)
    if (k < want.size() && s == want[k])
      ++k;
  return k == want.size();
}

std::string joined(const std::vector<std::string>& steps) {
  std::string out;
  for (auto& s : steps)
    out += s + "; ";
  return out;
}

// The index of the first line whose record satisfies `pred`.
template <class Pred>
size_t find_line(const std::vector<std::string>& lines, Pred pred, size_t from = 1) {
  for (size_t i = from; i < lines.size(); ++i)
    if (auto d = parse(lines[i]); d.IsObject() && pred(d))
      return i;
  ADD_FAILURE() << "no such record";
  return 0;
}

TEST(DeliveryReplayTest, TheListenerRetryTraceTellsTheWholeStory) {
  auto lines = read_lines();
  ASSERT_GT(lines.size(), 1u) << trace_file;
  auto steps = story(lines);
  EXPECT_TRUE(in_order(steps, {"wake", "claimed attempt 1", "POST", "answer 503", "retry in 1000 ms",
                               "nothing due yet", "claimed attempt 2", "POST", "answer 200",
                               "delivered"}))
    << joined(steps);
  // One delivery, two POSTs, one retry: nothing else was sent or completed.
  EXPECT_EQ(std::count(steps.begin(), steps.end(), "POST"), 2) << joined(steps);
  EXPECT_EQ(std::count(steps.begin(), steps.end(), "delivered"), 1) << joined(steps);
  // Both POSTs carry the same delivery id (the receiver's de-duplication key).
  auto first = find_line(lines, [](auto& d) { return is(d, "kind", "post_out"); });
  auto second = find_line(lines, [](auto& d) { return is(d, "kind", "post_out"); }, first + 1);
  ASSERT_GT(second, first);
  // delivery_attempt = [job]; job = [community, row, claim_id, delivery_id, ...]
  auto id = [&](size_t i) { return std::string{parse(lines[i])["msg"][0][3].GetString()}; };
  EXPECT_FALSE(id(first).empty());
  EXPECT_EQ(id(first), id(second));
}

TEST(DeliveryReplayTest, TheListenerRetryTraceReplaysStrictly) {
  auto out = replay_trace_file(trace_file.string(), {.strict = true});
  EXPECT_TRUE(out.identical) << out.summary();
  EXPECT_GT(out.checked, 0u);
}

// The listener's first answer changed from 503 to 200: the replayed
// supervisor completes the row as delivered where the live one scheduled a
// retry, and the replay stops at the completion request the store got.
TEST(DeliveryReplayTest, AListenerAnswerThatSaysSomethingElseIsADivergence) {
  auto lines = read_lines();
  auto i = find_line(lines, [](auto& d) { return is(d, "type", "delivery_response_in"); });
  ASSERT_GT(i, 0u);
  auto pos = lines[i].find("\"msg\":[[503,");
  ASSERT_NE(pos, std::string::npos) << lines[i];
  lines[i].replace(pos, 12, "\"msg\":[[200,");
  auto completion = find_line(
    lines, [](auto& d) { return is(d, "type", "delivery_complete_request"); }, i);
  auto out = replay_lines(lines);
  ASSERT_TRUE(out.divergence) << out.summary();
  EXPECT_EQ(out.divergence->actor, "delivery_store");
  EXPECT_EQ(out.divergence->kind, "db_request");
  EXPECT_EQ(out.divergence->seq, parse(lines[completion])["seq"].GetUint64());
}

// A POST the slot did not make (the recorded body says something else).
TEST(DeliveryReplayTest, APostTheReplayDidNotMakeIsADivergence) {
  auto lines = read_lines();
  auto i = find_line(lines, [](auto& d) { return is(d, "kind", "post_out"); });
  ASSERT_GT(i, 0u);
  auto pos = lines[i].find("are you there?");
  ASSERT_NE(pos, std::string::npos) << lines[i];
  lines[i].replace(pos, 14, "are you here??");
  auto out = replay_lines(lines);
  ASSERT_TRUE(out.divergence) << out.summary();
  EXPECT_EQ(out.divergence->kind, "post_out");
  EXPECT_EQ(out.divergence->seq, parse(lines[i])["seq"].GetUint64());
  EXPECT_NE(out.divergence->replayed.find("are you there?"), std::string::npos);
}

// A retry tick the live supervisor never took: the replay does not claim.
TEST(DeliveryReplayTest, ARetryClaimedWithoutItsTimerIsADivergence) {
  auto lines = read_lines();
  // The timer after the retry was scheduled, whose claim took the row again.
  auto retry = find_line(lines, [](auto& d) {
    return is(d, "type", "delivery_complete_request") && d["msg"][1].GetInt() == 1;
  });
  auto again = find_line(
    lines,
    [](auto& d) {
      return is(d, "kind", "db_reply") && is(d, "type", "delivery_claim_reply")
             && d["msg"][0].Size() > 0;
    },
    retry);
  size_t tick = again;
  while (tick > retry && !is(parse(lines[tick]), "kind", "timer"))
    --tick;
  ASSERT_GT(tick, retry) << "the retry was not claimed on a timer";
  auto seq = parse(lines[tick])["seq"].GetUint64();
  lines.erase(lines.begin() + static_cast<std::ptrdiff_t>(tick));
  auto out = replay_lines(lines);
  ASSERT_TRUE(out.divergence) << out.summary();
  EXPECT_GT(out.divergence->seq, seq);
}

}  // namespace
}  // namespace waggle
