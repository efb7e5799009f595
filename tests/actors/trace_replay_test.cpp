// Actor traces (docs/traces.md): the committed traces replay identically
// through the node's actors under the test coordinator, and a replay that
// goes another way is caught at the first record where it shows, with both
// sides. Also: the message codec round-trips, and the recorder writes what
// the format says.

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <rapidjson/document.h>

#include "actors/trace_recorder.hpp"
#include "actors/trace_replay.hpp"
#include "messages/trace_codec.hpp"

namespace waggle {
namespace {

namespace fs = std::filesystem;

fs::path traces_dir() {
  return fs::path{WAGGLE_SOURCE_DIR} / "tests" / "traces";
}

std::vector<std::string> read_lines(const fs::path& p) {
  std::ifstream in{p};
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);)
    lines.push_back(line);
  return lines;
}

replay_outcome replay_lines(const std::vector<std::string>& lines) {
  std::stringstream ss;
  for (auto& l : lines)
    ss << l << "\n";
  return replay_trace(ss);
}

rapidjson::Document parse(const std::string& line) {
  rapidjson::Document doc;
  doc.Parse(line.c_str());
  return doc;
}

// The index of the first line whose record satisfies `pred`.
template <class Pred>
size_t find_line(const std::vector<std::string>& lines, Pred pred) {
  for (size_t i = 1; i < lines.size(); ++i)
    if (auto doc = parse(lines[i]); doc.IsObject() && pred(doc))
      return i;
  ADD_FAILURE() << "no such record";
  return 0;
}

bool is(const rapidjson::Document& d, const char* key, const std::string& value) {
  return d.HasMember(key) && d[key].IsString() && value == d[key].GetString();
}

// -- the committed traces -------------------------------------------------------

TEST(TraceReplayTest, EveryCommittedTraceReplaysIdentically) {
  std::vector<fs::path> files;
  for (auto& e : fs::directory_iterator{traces_dir()})
    if (e.path().extension() == ".jsonl")
      files.push_back(e.path());
  ASSERT_GE(files.size(), 3u) << "tests/traces/ lost its traces";
  for (auto& f : files) {
    auto out = replay_trace_file(f.string());
    EXPECT_TRUE(out.identical) << f.filename() << ": " << out.summary();
    EXPECT_GT(out.checked, 0u) << f.filename();
  }
}

// The three stories the issue asks for are there, and each shows its point.
TEST(TraceReplayTest, TheClientSessionHoldsAuthPublishDuplicateHistoryLiveAndClose) {
  auto lines = read_lines(traces_dir() / "client-session.jsonl");
  auto frame_out_has = [&](const std::string& needle) {
    return find_line(lines, [&](auto& d) {
      return is(d, "kind", "frame_out") && std::string{d["text"].GetString()}.find(needle)
                                             != std::string::npos;
    });
  };
  EXPECT_GT(frame_out_has("\"duplicate:"), 0u);
  EXPECT_GT(frame_out_has("[\"EOSE\""), 0u);
  EXPECT_GT(find_line(lines, [](auto& d) {
              return is(d, "kind", "frame_in")
                     && std::string{d["text"].GetString()}.rfind("[\"CLOSE\"", 0) == 0;
            }),
            0u);
  EXPECT_GT(find_line(lines, [](auto& d) { return is(d, "kind", "closed"); }), 0u);
}

TEST(TraceReplayTest, TheBadSignatureIsRefusedWithoutTouchingTheDatabase) {
  auto lines = read_lines(traces_dir() / "bad-signature.jsonl");
  EXPECT_GT(find_line(lines, [](auto& d) {
              return is(d, "kind", "frame_out")
                     && std::string{d["text"].GetString()}.find("\"invalid:")
                          != std::string::npos;
            }),
            0u);
  for (auto& l : lines)
    EXPECT_EQ(l.find("write_batch_request"), std::string::npos) << l;
}

// The roster race as recorded: the second membership change's reply comes
// while the first change's publication is pending, and a second publication
// follows. Replaying it runs the roster actor's dirty flag.
TEST(TraceReplayTest, TheRosterRaceShowsASecondPublicationAfterTheLateChange) {
  auto lines = read_lines(traces_dir() / "roster-race.jsonl");
  std::vector<std::string> session;
  for (auto& l : lines)
    if (auto d = parse(l); is(d, "actor", "group_session"))
      session.push_back(std::string{d["kind"].GetString()} + " " + d["type"].GetString());
  std::vector<std::string> race = {
    "db_request group_command_request", "db_reply group_command_reply",
    "db_request group_command_request", "db_reply group_command_reply",
    "db_request roster_publish_request", "db_reply roster_publish_reply",
    "db_request roster_publish_request",
  };
  auto it = std::search(session.begin(), session.end(), race.begin(), race.end());
  EXPECT_NE(it, session.end()) << "the recording lost the interleaving; re-record it";
}

// The record script's relay key (scripts/record-traces) never reaches a trace.
TEST(TraceReplayTest, NoTraceHoldsTheRelaySecretKey) {
  std::string secret(63, '0');
  secret += '7';
  for (auto& e : fs::directory_iterator{traces_dir()})
    for (auto& l : read_lines(e.path()))
      EXPECT_EQ(l.find(secret), std::string::npos) << e.path().filename();
}

// -- divergences ----------------------------------------------------------------

// What a changed OK prefix looks like to the replay: the recorded frame and
// the replayed one differ, and the divergence names that record.
TEST(TraceReplayTest, AChangedFrameIsTheDivergenceWithBothSides) {
  auto lines = read_lines(traces_dir() / "client-session.jsonl");
  auto i = find_line(lines, [](auto& d) {
    return is(d, "kind", "frame_out")
           && std::string{d["text"].GetString()}.find("\"duplicate:") != std::string::npos;
  });
  ASSERT_GT(i, 0u);
  auto original = lines[i];
  auto pos = lines[i].find("duplicate:");
  lines[i].replace(pos, 10, "dupe:");
  auto out = replay_lines(lines);
  ASSERT_FALSE(out.identical);
  ASSERT_TRUE(out.divergence);
  EXPECT_EQ(out.divergence->seq, parse(original)["seq"].GetUint64());
  EXPECT_EQ(out.divergence->kind, "frame_out");
  EXPECT_EQ(out.divergence->actor, "conn-1");
  EXPECT_NE(out.divergence->recorded.find("dupe:"), std::string::npos);
  EXPECT_NE(out.divergence->replayed.find("duplicate:"), std::string::npos);
  EXPECT_NE(out.summary().find("diverged at seq"), std::string::npos);
}

// A database reply that says something else changes what the actors do.
TEST(TraceReplayTest, ADifferentDatabaseReplyShowsInTheFramesThatFollow) {
  auto lines = read_lines(traces_dir() / "client-session.jsonl");
  // The first write's outcome: stored (0) -> rejected (3).
  auto i = find_line(lines, [](auto& d) { return is(d, "type", "write_batch_reply"); });
  auto pos = lines[i].find("\"msg\":[[[0,");
  ASSERT_NE(pos, std::string::npos);
  lines[i].replace(pos, 11, "\"msg\":[[[3,");
  auto out = replay_lines(lines);
  ASSERT_TRUE(out.divergence);
  EXPECT_EQ(out.divergence->kind, "frame_out");
  EXPECT_GT(out.divergence->seq, parse(lines[i])["seq"].GetUint64());
}

TEST(TraceReplayTest, AMissingRequestIsNamed) {
  auto lines = read_lines(traces_dir() / "roster-race.jsonl");
  // Pretend the recording saw one more publication than the replay makes.
  auto last = lines.back();
  auto seq = parse(last)["seq"].GetUint64();
  lines.push_back("{\"seq\":" + std::to_string(seq + 1)
                  + ",\"actor\":\"group_session\",\"kind\":\"db_request\",\"type\":"
                    "\"roster_publish_request\",\"msg\":[1,\"x\",0]}");
  auto out = replay_lines(lines);
  ASSERT_TRUE(out.divergence);
  EXPECT_EQ(out.divergence->seq, seq + 1);
  EXPECT_EQ(out.divergence->replayed, "(no request)");
}

TEST(TraceReplayTest, AnOutputTheTraceLacksIsCaughtAtTheEnd) {
  auto lines = read_lines(traces_dir() / "bad-signature.jsonl");
  auto i = find_line(lines, [](auto& d) {
    return is(d, "kind", "frame_out")
           && std::string{d["text"].GetString()}.find("auth-required:") != std::string::npos;
  });
  lines.erase(lines.begin() + static_cast<std::ptrdiff_t>(i));
  auto out = replay_lines(lines);
  ASSERT_TRUE(out.divergence);
  EXPECT_EQ(out.divergence->recorded, "(no frame)");
  EXPECT_NE(out.divergence->replayed.find("auth-required:"), std::string::npos);
}

// The order points: each names what the live actor took, and the replay
// refuses to invent it.
TEST(TraceReplayTest, AReplyTakenBeforeTheSessionAnsweredIsADivergence) {
  auto lines = read_lines(traces_dir() / "client-session.jsonl");
  auto reply = find_line(lines, [](auto& d) { return is(d, "type", "write_batch_reply") && is(d, "kind", "db_reply"); });
  auto taken = find_line(lines, [](auto& d) { return is(d, "kind", "reply_in") && is(d, "actor", "ingest"); });
  ASSERT_LT(reply, taken);
  // Swap the two lines' contents but keep their sequence numbers in order.
  auto reply_doc = parse(lines[reply]);
  auto taken_doc = parse(lines[taken]);
  auto reseq = [](std::string line, uint64_t seq) {
    auto comma = line.find(',');
    return "{\"seq\":" + std::to_string(seq) + line.substr(comma);
  };
  auto a = reseq(lines[taken], reply_doc["seq"].GetUint64());
  auto b = reseq(lines[reply], taken_doc["seq"].GetUint64());
  lines[reply] = a;
  lines[taken] = b;
  auto out = replay_lines(lines);
  ASSERT_TRUE(out.divergence);
  EXPECT_EQ(out.divergence->kind, "reply_in");
  EXPECT_EQ(out.divergence->seq, reply_doc["seq"].GetUint64());
}

TEST(TraceReplayTest, AnEventIngestTookThatNoConnectionSentIsADivergence) {
  auto lines = read_lines(traces_dir() / "client-session.jsonl");
  auto i = find_line(lines, [](auto& d) { return is(d, "kind", "ingest_in"); });
  auto doc = parse(lines[i]);
  std::string id = doc["id"].GetString();
  lines[i].replace(lines[i].find(id), id.size(), std::string(64, 'f'));
  auto out = replay_lines(lines);
  ASSERT_TRUE(out.divergence);
  EXPECT_EQ(out.divergence->kind, "ingest_in");
  EXPECT_EQ(out.divergence->seq, doc["seq"].GetUint64());
}

TEST(TraceReplayTest, AReadThePoolTookFromAnotherConnectionIsADivergence) {
  auto lines = read_lines(traces_dir() / "client-session.jsonl");
  auto i = find_line(lines, [](auto& d) { return is(d, "kind", "reader_in"); });
  auto doc = parse(lines[i]);
  std::string from = doc["from"].GetString();
  lines[i].replace(lines[i].find("\"from\":\"" + from), 8 + from.size(), "\"from\":\"conn-99");
  auto out = replay_lines(lines);
  ASSERT_TRUE(out.divergence);
  EXPECT_EQ(out.divergence->kind, "reader_in");
  EXPECT_EQ(out.divergence->seq, doc["seq"].GetUint64());
}

// The burst is recorded under load: ingest batched, held batches for the
// commit delay (ingest_tick timers) and took writer replies between events.
TEST(TraceReplayTest, ThePublishBurstShowsBatchesHoldsAndInterleavedReplies) {
  auto lines = read_lines(traces_dir() / "publish-burst.jsonl");
  size_t ticks = 0, multi_event_batches = 0, events_after_reply = 0;
  bool after_reply = false;
  for (auto& l : lines) {
    auto d = parse(l);
    if (is(d, "kind", "timer"))
      ++ticks;
    if (is(d, "type", "write_batch_request") && d["msg"][0].Size() > 1)
      ++multi_event_batches;
    if (is(d, "kind", "reply_in") && is(d, "actor", "ingest"))
      after_reply = true;
    if (is(d, "kind", "ingest_in") && after_reply) {
      ++events_after_reply;
      after_reply = false;
    }
  }
  EXPECT_GT(ticks, 0u);
  EXPECT_GT(multi_event_batches, 0u);
  EXPECT_GT(events_after_reply, 0u);
}

TEST(TraceReplayTest, WhatIsNotATraceIsAnErrorNotADivergence) {
  std::stringstream empty;
  EXPECT_FALSE(replay_trace(empty).error.empty());
  std::stringstream junk{"{\"not\":\"a trace\"}\n"};
  EXPECT_FALSE(replay_trace(junk).error.empty());
  std::stringstream future{"{\"seq\":0,\"kind\":\"header\",\"waggle_trace\":99,\"mode\":\"full\","
                           "\"node\":{}}\n"};
  EXPECT_NE(replay_trace(future).error.find("format"), std::string::npos);
  std::stringstream sampled{"{\"seq\":0,\"kind\":\"header\",\"waggle_trace\":1,\"mode\":"
                            "\"sampled\",\"sample\":10,\"node\":{}}\n"};
  EXPECT_NE(replay_trace(sampled).error.find("sampled"), std::string::npos);
  auto lines = read_lines(traces_dir() / "bad-signature.jsonl");
  lines.push_back("{\"seq\":1,\"actor\":\"conn-1\",\"kind\":\"closed\"}");
  EXPECT_NE(replay_lines(lines).error.find("increase"), std::string::npos);
}

// -- the codec ------------------------------------------------------------------

template <class T>
void expect_round_trip(const T& msg) {
  auto json = trace_codec::encode(msg);
  rapidjson::Document doc;
  doc.Parse(json.c_str());
  ASSERT_FALSE(doc.HasParseError()) << json;
  T back;
  ASSERT_TRUE(trace_codec::decode(doc, back)) << json;
  EXPECT_EQ(trace_codec::encode(back), json);
}

TEST(TraceCodecTest, DatabaseMessagesRoundTrip) {
  proto::event ev;
  ev.kind = 1;
  ev.created_at = 1700000000;
  ev.tags = {{"h", "g1"}};
  ev.content = "a \"quoted\" \u00e9 line\n";
  proto::sign(ev, std::string(63, '0') + "3");
  auto parsed = proto::parse_event(proto::to_json(ev));
  ASSERT_TRUE(parsed) << parsed.error().message();
  auto ptr = std::make_shared<const proto::event>(*parsed);
  expect_round_trip(write_batch_request{{{7, ptr}, {8, ptr}}});
  expect_round_trip(write_batch_reply{
    {{db::write_outcome::stored, ""}, {db::write_outcome::rejected, "bad"}}, 0.25});
  auto filter = proto::parse_filter(R"({"kinds":[1],"#h":["g1"],"limit":5})", {});
  ASSERT_TRUE(filter);
  expect_round_trip(history_request{3, {*filter}, {{"g1"}, {"ab"}}});
  expect_round_trip(history_reply{{"{}", "[]"}, {ec::restricted, "no"}, {{"g1", true, {"ab"}}}});
  expect_round_trip(count_reply{42, {}});
  expect_round_trip(access_reply{{{"g1", false, {"a", "b"}}}, {}});
  expect_round_trip(group_command_request{1, ptr});
  expect_round_trip(group_command_reply{{db::write_outcome::stored, ""},
                                        {"g1", true, false, true, false, {"x", "y"}}});
  expect_round_trip(roster_publish_request{1, "g1", 1700000000});
  expect_round_trip(roster_publish_reply{{ptr}, {}});
  expect_round_trip(roster_repair_reply{2, {{1, ptr}}, {}});
  expect_round_trip(fence_probe_reply{{ec::internal, "x"}});
  expect_round_trip(channels_archived{{{1, "g1"}, {2, "g2"}}});
  EXPECT_STREQ(trace_codec::name_of<write_batch_request>(), "write_batch_request");
}

TEST(TraceCodecTest, AReplyOfTheWrongShapeIsRefused) {
  rapidjson::Document doc;
  doc.Parse(R"([[[0,""]],"not a number"])");
  write_batch_reply reply;
  EXPECT_FALSE(trace_codec::decode(doc, reply));
  doc.Parse(R"([1,2,3])");
  history_reply h;
  EXPECT_FALSE(trace_codec::decode(doc, h));
}

// -- the recorder -----------------------------------------------------------------

TEST(TraceRecorderTest, WritesAHeaderThenNumberedRecordsOnlyOnceStarted) {
  auto path = fs::temp_directory_path() / ("waggle-trace-" + std::to_string(::getpid()) + ".jsonl");
  {
    auto rec = std::make_shared<trace_recorder>(path.string(), 0);
    rec->record("conn-1", "frame_in", trace_fields{}.str("text", "before start"));
    rec->start(R"({"writers":1})");
    rec->record("conn-1", "frame_in", trace_fields{}.str("text", "[\"REQ\",\"a\"]"));
    node_env env;
    env.sources.unix_now = [] { return int64_t{1700000000}; };
    env.trace = rec;
    EXPECT_EQ(env.for_actor("conn-1").unix_now(), 1700000000);
    trace_node_message(env.for_actor("writer-0"), "db_reply", count_reply{3, {}});
  }
  auto lines = read_lines(path);
  fs::remove(path);
  ASSERT_EQ(lines.size(), 4u);
  auto header = parse(lines[0]);
  EXPECT_EQ(header["waggle_trace"].GetInt(), trace_format_version);
  EXPECT_TRUE(is(header, "mode", "full"));
  EXPECT_EQ(lines[1], R"({"seq":1,"actor":"conn-1","kind":"frame_in","text":"[\"REQ\",\"a\"]"})");
  EXPECT_EQ(lines[2],
            R"({"seq":2,"actor":"conn-1","kind":"reading","what":"unix_now","value":1700000000})");
  EXPECT_EQ(lines[3],
            R"({"seq":3,"actor":"writer-0","kind":"db_reply","type":"count_reply","msg":[3,[0,""]]})");
}

TEST(TraceRecorderTest, ASampledTraceKeepsOnlyEveryNthConnectionAndNoDatabase) {
  auto path = fs::temp_directory_path() / ("waggle-sample-" + std::to_string(::getpid()) + ".jsonl");
  {
    auto rec = std::make_shared<trace_recorder>(path.string(), 3);
    rec->start("{}");
    EXPECT_FALSE(rec->node_level());
    EXPECT_FALSE(rec->wants_connection("conn-1"));
    EXPECT_FALSE(rec->wants_connection("conn-2"));
    EXPECT_TRUE(rec->wants_connection("conn-3"));
    EXPECT_TRUE(rec->wants_connection("conn-6"));
    EXPECT_FALSE(rec->wants_connection("ingest"));
    node_env env;
    env.sources.unix_now = [] { return int64_t{5}; };
    env.trace = rec;
    env.for_actor("conn-2").unix_now();
    env.for_actor("conn-3").unix_now();
    trace_node_message(env.for_actor("writer-0"), "db_reply", count_reply{3, {}});
  }
  auto lines = read_lines(path);
  fs::remove(path);
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_TRUE(is(parse(lines[0]), "mode", "sampled"));
  EXPECT_TRUE(is(parse(lines[1]), "actor", "conn-3"));
}

}  // namespace
}  // namespace waggle
