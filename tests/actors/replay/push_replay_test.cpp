// Push in traces (docs/traces.md, "Push"): the committed push-race trace
// holds the race the lease barrier handles (a message whose batch skipped
// the gate, a lease right behind it that waits and names it), it replays
// strictly through the real ingest and push supervisor, and a trace whose
// matcher decided other wakes, whose gate load, header or gateway answer
// says something else, diverges where it shows.

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <rapidjson/document.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include "actors/replay/trace_replay.hpp"
#include "tests/actors/replay/trace_lines.hpp"

namespace waggle {
namespace {

const std::filesystem::path trace_file = testing::traces_dir() / "push-race.jsonl";

std::vector<std::string> read_lines() { return testing::read_lines(trace_file); }

replay_outcome replay_lines(const std::vector<std::string>& lines) {
  return testing::replay_lines(lines, {.strict = true});
}

rapidjson::Document parse(const std::string& line) {
  rapidjson::Document doc;
  doc.Parse(line.c_str());
  return doc;
}

std::string render(const rapidjson::Value& v) {
  rapidjson::StringBuffer buf;
  rapidjson::Writer<rapidjson::StringBuffer> w{buf};
  v.Accept(w);
  return buf.GetString();
}

bool is(const rapidjson::Value& d, const char* key, const std::string& value) {
  return d.HasMember(key) && d[key].IsString() && value == d[key].GetString();
}

bool starts(const rapidjson::Value& d, const char* key, const std::string& prefix) {
  return d.HasMember(key) && d[key].IsString()
         && std::string{d[key].GetString()}.rfind(prefix, 0) == 0;
}

// The index of the first line from `from` whose record satisfies `pred`.
template <class Pred>
size_t find_line(const std::vector<std::string>& lines, Pred pred, size_t from = 1) {
  for (size_t i = from; i < lines.size(); ++i)
    if (auto d = parse(lines[i]); d.IsObject() && pred(d))
      return i;
  ADD_FAILURE() << "no such record";
  return 0;
}

uint64_t seq_of(const std::string& line) { return parse(line)["seq"].GetUint64(); }

// Line `i` with its msg (or node, for the header) edited by `edit`.
template <class Edit>
void edit_line(std::vector<std::string>& lines, size_t i, Edit edit) {
  auto d = parse(lines[i]);
  edit(d, d.GetAllocator());
  lines[i] = render(d);
}

// A write batch's events as parsed JSON: msg [items, push_gate_all,
// push_gated, lease, push_skipped], an item [community, event JSON text].
rapidjson::Document event_of(const rapidjson::Value& batch, size_t k = 0) {
  return parse(batch["msg"][0][k][1].GetString());
}

bool is_batch(const rapidjson::Value& d) {
  return is(d, "kind", "db_request") && is(d, "type", "write_batch_request");
}

TEST(PushReplayTest, ThePushRaceTraceShowsTheLeaseWaitingAndNamingTheSkippedMessage) {
  auto lines = read_lines();
  auto header = parse(lines[0]);
  ASSERT_TRUE(header["node"]["push_enabled"].GetBool());
  // Bob's first message: a batch that skipped the gate (the load said no
  // community has a lease; not all, none gated), not a lease.
  auto first = find_line(lines, [](const auto& d) {
    return is_batch(d) && event_of(d)["kind"].GetInt() == 9;
  });
  auto b1 = parse(lines[first]);
  auto first_id = std::string{event_of(b1)["id"].GetString()};
  EXPECT_FALSE(b1["msg"][1].GetBool());
  EXPECT_EQ(b1["msg"][2].Size(), 0u);
  EXPECT_FALSE(b1["msg"][3].GetBool());
  // The lease, alone, after it, naming it as skipped.
  auto lease = find_line(lines, [](const auto& d) {
    return is_batch(d) && event_of(d)["kind"].GetInt() == 30350;
  });
  ASSERT_GT(lease, first);
  auto bl = parse(lines[lease]);
  EXPECT_EQ(bl["msg"][0].Size(), 1u);
  EXPECT_TRUE(bl["msg"][3].GetBool());
  ASSERT_EQ(bl["msg"][4].Size(), 1u);
  EXPECT_EQ(std::string{bl["msg"][4][0].GetString()}, first_id);
  // Ingest took the lease while the first batch was still unanswered: its
  // ingest_in comes before the reply ingest took for that batch.
  auto lease_id = std::string{event_of(bl)["id"].GetString()};
  auto lease_in = find_line(lines, [&](const auto& d) {
    return is(d, "kind", "ingest_in") && is(d, "id", lease_id);
  });
  auto first_reply = find_line(lines, [](const auto& d) {
    return is(d, "actor", "ingest") && is(d, "kind", "reply_in");
  });
  EXPECT_LT(lease_in, first_reply);
  // The second message is gated: its community is in push_gated.
  auto second = find_line(lines, [](const auto& d) {
    return is_batch(d) && event_of(d)["kind"].GetInt() == 9;
  }, lease + 1);
  auto b2 = parse(lines[second]);
  EXPECT_EQ(render(b2["msg"][2]), "[" + std::to_string(b2["msg"][0][0][0].GetInt64()) + "]");
  // Two matcher batches, one wake each (the first for the skipped message),
  // two POSTs, two completion batches.
  size_t matches = 0, posts = 0, completions = 0;
  for (size_t i = 1; i < lines.size(); ++i) {
    auto d = parse(lines[i]);
    if (is(d, "kind", "match")) {
      ++matches;
      EXPECT_EQ(d["msg"][12].Size(), 1u) << lines[i];  // wake_events
      if (matches == 1)
        EXPECT_EQ(std::string{d["msg"][1][0].GetString()}, first_id);
    }
    posts += is(d, "kind", "post_out") && starts(d, "actor", "push-slot-");
    completions += is(d, "type", "delivery_complete_batch") && is(d, "kind", "db_request");
  }
  EXPECT_EQ(matches, 2u);
  EXPECT_EQ(posts, 2u);
  EXPECT_EQ(completions, 2u);
}

TEST(PushReplayTest, ThePushRaceTraceReplaysStrictly) {
  auto out = replay_lines(read_lines());
  EXPECT_TRUE(out.identical) << out.summary();
}

// The matcher is not run, but its decision is: a recorded wake the pure
// match would not decide is a divergence at its match record.
TEST(PushReplayTest, AWakeTheMatchWouldNotDecideIsADivergence) {
  auto lines = read_lines();
  auto i = find_line(lines, [](const auto& d) { return is(d, "kind", "match"); });
  edit_line(lines, i, [](auto& d, auto&) { d["msg"][13][0].SetUint64(1); });  // wake_leases
  auto out = replay_lines(lines);
  ASSERT_TRUE(out.divergence) << out.summary();
  EXPECT_EQ(out.divergence->seq, seq_of(lines[i]));
  EXPECT_EQ(out.divergence->kind, "match");
  EXPECT_EQ(out.divergence->recorded, "wakes [0:1] (event:lease)");
  EXPECT_EQ(out.divergence->replayed, "wakes [0:0] (event:lease)");
}

// The gate load is fed to the replayed ingest: had it named the community,
// the first message's batch would have gated it.
TEST(PushReplayTest, AGateLoadThatNamedTheCommunityIsADivergenceAtTheFirstBatch) {
  auto lines = read_lines();
  auto load = find_line(lines, [](const auto& d) { return is(d, "type", "push_gate_loaded"); });
  edit_line(lines, load, [](auto& d, auto& a) { d["msg"][0].PushBack(int64_t{1}, a); });
  auto first = find_line(lines, [](const auto& d) { return is_batch(d); });
  auto out = replay_lines(lines);
  ASSERT_TRUE(out.divergence) << out.summary();
  EXPECT_EQ(out.divergence->seq, seq_of(lines[first]));
  EXPECT_NE(out.divergence->replayed.find("false,[1],false,[]]"), std::string::npos)
    << out.divergence->replayed;
}

// The header says push was on: a replay that believes otherwise spawns no
// push supervisor (the reading of its first claim is not taken) and runs
// ingest without the gate.
TEST(PushReplayTest, AHeaderThatSaysPushWasOffIsADivergence) {
  auto lines = read_lines();
  edit_line(lines, 0, [](auto& d, auto&) { d["node"]["push_enabled"].SetBool(false); });
  auto out = replay_lines(lines);
  ASSERT_TRUE(out.divergence) << out.summary();
  EXPECT_EQ(out.divergence->actor, "push_delivery");
  EXPECT_EQ(out.divergence->kind, "reading");
  // With the supervisor's records gone too: push off encodes the first batch
  // as "loaded, nothing gated" does, but an ingest without push remembers no
  // skipped message, so the lease names none.
  std::vector<std::string> no_supervisor;
  for (auto& l : lines) {
    auto d = parse(l);
    bool push_delivery = starts(d, "actor", "push_delivery") || starts(d, "actor", "push_store")
                         || starts(d, "actor", "push-slot-");
    if (!push_delivery)
      no_supervisor.push_back(l);
  }
  auto lease = find_line(no_supervisor, [](const auto& d) {
    return is_batch(d) && event_of(d)["kind"].GetInt() == 30350;
  });
  out = replay_lines(no_supervisor);
  ASSERT_TRUE(out.divergence) << out.summary();
  EXPECT_EQ(out.divergence->seq, seq_of(no_supervisor[lease]));
  EXPECT_NE(out.divergence->replayed.find(",true,[]]"), std::string::npos)
    << out.divergence->replayed;
}

// Renumbers the records in file order (a moved record keeps the order the
// file gives it, as a recorder would have numbered it).
void renumber(std::vector<std::string>& lines) {
  for (size_t i = 1; i < lines.size(); ++i)
    edit_line(lines, i, [i](auto& d, auto&) { d["seq"].SetUint64(i); });
}

// The second wake as a recording can hold it: ingest takes the writer's
// reply to the second message (and its OK goes out) while the slot is
// between its clock reading and its post_out, which it makes in one handler
// without a trace section. The POST is in time with its reading; the
// reading recorded after that input is not. (Built from the committed trace
// whatever order it recorded the two paths in.)
TEST(PushReplayTest, AnInputBetweenASlotsReadingAndItsPostIsNoDivergence) {
  auto lines = read_lines();
  auto lease = find_line(lines, [](const auto& d) {
    return is_batch(d) && event_of(d)["kind"].GetInt() == 30350;
  });
  auto second_batch = find_line(lines, [](const auto& d) {
    return is_batch(d) && event_of(d)["kind"].GetInt() == 9;
  }, lease + 1);
  ASSERT_GT(second_batch, 0u);
  auto second_id = std::string{event_of(parse(lines[second_batch]))["id"].GetString()};
  auto writer_reply = find_line(lines, [](const auto& d) { return is(d, "kind", "db_reply"); },
                                second_batch);
  auto reply = find_line(lines, [](const auto& d) {
    return is(d, "actor", "ingest") && is(d, "kind", "reply_in");
  }, second_batch);
  auto ok = find_line(lines, [&](const auto& d) {
    return is(d, "kind", "frame_out") && std::string{d["text"].GetString()}.find(second_id)
                                           != std::string::npos;
  }, reply);
  ASSERT_GT(ok, 0u);
  // Ingest's path from the reply to the OK; everything else stays in order.
  std::vector<std::string> block, rest;
  for (size_t i = 0; i < lines.size(); ++i) {
    auto d = parse(lines[i]);
    bool path = i >= reply && i <= ok
                && (is(d, "actor", "ingest") || is(d, "actor", "hub") || starts(d, "actor", "conn-"));
    (path ? block : rest).push_back(lines[i]);
  }
  size_t post = 0;
  for (size_t i = 1; i < rest.size(); ++i)
    if (auto d = parse(rest[i]); is(d, "kind", "post_out") && starts(d, "actor", "push-slot-"))
      post = i;  // the last: the second wake's
  ASSERT_GT(post, 0u);
  auto reading = post - 1;
  ASSERT_TRUE(is(parse(rest[reading]), "kind", "reading")) << rest[reading];
  // The writer answered before: the reply ingest takes is ready there.
  ASSERT_LT(std::find(rest.begin(), rest.end(), lines[writer_reply]) - rest.begin(),
            static_cast<std::ptrdiff_t>(reading));
  auto moved = [&](size_t at) {
    std::vector<std::string> out(rest.begin(), rest.begin() + at);
    out.insert(out.end(), block.begin(), block.end());
    out.insert(out.end(), rest.begin() + at, rest.end());
    renumber(out);
    return out;
  };
  auto out = replay_lines(moved(post));
  EXPECT_TRUE(out.identical) << out.summary();
  out = replay_lines(moved(reading));
  ASSERT_TRUE(out.divergence) << out.summary();
  EXPECT_EQ(out.divergence->kind, "reading");
  EXPECT_NE(out.divergence->replayed.find("too early"), std::string::npos) << out.summary();
}

// The push supervisor runs for real: a gateway that answered 503 makes it
// complete the wake as a retry, where the recorded completion delivered it.
TEST(PushReplayTest, AGatewayAnswerThatSaysSomethingElseIsADivergenceAtTheCompletion) {
  auto lines = read_lines();
  auto answer = find_line(lines, [](const auto& d) {
    return is(d, "type", "delivery_response_in") && starts(d, "actor", "push-slot-");
  });
  edit_line(lines, answer, [](auto& d, auto&) { d["msg"][0][0].SetInt(503); });
  auto completion = find_line(lines, [](const auto& d) {
    return is(d, "kind", "db_request") && is(d, "type", "delivery_complete_batch");
  }, answer);
  auto out = replay_lines(lines);
  ASSERT_TRUE(out.divergence) << out.summary();
  EXPECT_EQ(out.divergence->seq, seq_of(lines[completion]));
  EXPECT_EQ(out.divergence->actor, "push_store");
}

}  // namespace
}  // namespace waggle
