// The bus probe's boundary in a trace (docs/traces.md, "The bus"): what the
// bus brought it and what it sent the bus are recorded, and a replay runs the
// probe against a stand-in bus. A recording made here, under the test
// coordinator (a ping, a cluster ping, a probe round, a lost probe), replays
// strictly; the committed bus.jsonl (a live node on --bus postgres) does too,
// and goes red where its records are edited.

#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <unistd.h>

#include <rapidjson/document.h>

#include "actors/bus/bus_probe.hpp"
#include "actors/bus/inproc_bus.hpp"
#include "actors/node/node.hpp"
#include "actors/replay/trace_replay.hpp"
#include "actors/trace/trace_recorder.hpp"
#include "tests/actors/actor_fixture.hpp"
#include "tests/actors/replay/trace_lines.hpp"

namespace waggle {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using testing::read_lines;
using testing::replay_lines;
using testing::traces_dir;

caf::behavior asker(caf::event_based_actor* self, bus_actor bus, bus_request req,
                    std::shared_ptr<std::optional<std::string>> out) {
  self->request(bus, caf::infinite, std::move(req))
    .then([out](bus_message& m) { *out = m.payload; }, [](caf::error&) {});
  return {[](int) {}};
}

// A bus between the probe and the inproc bus that can lose probes: what it
// passes on is what the inproc bus does, what it swallows is acked, never
// delivered (a cut-off node).
bus_actor::behavior_type lossy_bus(bus_actor::pointer self, bus_actor inner,
                                   std::shared_ptr<bool> lose) {
  return {
    [self, inner, lose](bus_publish& p) -> caf::result<bus_ack> {
      if (*lose && p.subject.find(".probe") != std::string::npos)
        return bus_ack{0};
      return self->delegate(inner, std::move(p));
    },
    [self, inner](bus_subscribe& s) { return self->delegate(inner, std::move(s)); },
    [self, inner](bus_unsubscribe u) { self->send(inner, u); },
    [self, inner](bus_request& r) { return self->delegate(inner, std::move(r)); },
  };
}

class BusReplayTest : public testing::actor_test {};

TEST_F(BusReplayTest, ARecordingOfPingsAndProbesReplaysStrictly) {
  auto path = fs::temp_directory_path() / ("waggle-bus-" + std::to_string(::getpid()) + ".jsonl");
  {
    auto rec = std::make_shared<trace_recorder>(path.string(), 0);
    node_config cfg;
    cfg.bus_probe_ms = 1000;
    rec->start(trace_node_json(cfg, std::string(64, 'a'), "t1"));
    auto env = test_env();
    env.trace = rec;
    auto bus_env = env;
    bus_env.trace = nullptr;  // as the node spawns its bus: the driver records nothing
    auto inner = spawn(inproc_bus_impl, bus_env.for_actor("bus"));
    auto lose = std::make_shared<bool>(false);
    auto bus = spawn(lossy_bus, inner, lose);
    spawn(bus_probe_impl, caf::actor_cast<bus_actor>(bus), bus_probe_settings_for("t1", 1000),
          env.for_actor("bus_probe"));
    run();
    for (auto subject : {"waggle.node.t1.ping", "waggle.cluster.ping"}) {
      auto got = std::make_shared<std::optional<std::string>>();
      spawn(asker, caf::actor_cast<bus_actor>(inner), bus_request{subject, "{}", 1000}, got);
      run();
      ASSERT_TRUE(*got) << subject;
    }
    sched().advance_time(1s);  // probe 1 goes round
    run();
    *lose = true;
    sched().advance_time(1s);  // probe 2 goes out, and nowhere
    run();
    sched().advance_time(1s);  // its deadline (min(5 s, the interval)); probe 3 goes out
    run();
    EXPECT_EQ(env.stats->bus.probes_returned, 1u);
    EXPECT_EQ(env.stats->bus.probes_lost, 1u);
    EXPECT_EQ(env.stats->bus.pings_answered, 2u);
    rec->flush();
  }
  auto lines = read_lines(path);
  fs::remove(path);
  auto out = replay_lines(lines, {.strict = true});
  EXPECT_TRUE(out.identical) << out.summary();
  EXPECT_GT(out.checked, 5u);
  // Live, another actor's input (a delivery poll) can be recorded before the
  // probe's first subscribes, which no input caused: still in time.
  auto behind = lines;
  behind.insert(behind.begin() + 1, R"({"seq":1,"actor":"ingest","kind":"timer","type":"ingest_tick","msg":[]})");
  for (size_t i = 2; i < behind.size(); ++i) {
    auto comma = behind[i].find(',');
    behind[i] = "{\"seq\":" + std::to_string(i) + behind[i].substr(comma);
  }
  auto late = replay_lines(behind, {.strict = true});
  EXPECT_TRUE(late.identical) << late.summary();
  // Without the bus fields in the header the replay spawns no probe, and
  // its records are a divergence, not silently skipped.
  auto old_header = lines;
  auto cut = old_header[0].find(",\"bus_node_id\"");
  ASSERT_NE(cut, std::string::npos);
  old_header[0] = old_header[0].substr(0, cut) + "}}";
  auto without = replay_lines(old_header);
  ASSERT_TRUE(without.divergence) << without.summary();
  EXPECT_EQ(without.divergence->actor, "bus_probe");
}

// -- the committed trace ------------------------------------------------------------

std::vector<std::string> bus_trace() { return read_lines(traces_dir() / "bus.jsonl"); }

using testing::find_line;

TEST(BusTraceTest, HoldsARequestAQueueGroupDeliveryAndAProbeRoundAndReplaysStrictly) {
  auto lines = bus_trace();
  ASSERT_GT(lines.size(), 10u);
  EXPECT_NE(lines[0].find("\"bus_node_id\":\"rec1\""), std::string::npos);
  // Subscribed to its three subjects, the cluster ping in group "any".
  find_line(lines, {"\"bus_out\"", "bus_subscribe", "[\"waggle.cluster.ping\",\"any\",null]"});
  // A ping to the node and one to the cluster, each with an inbox, each answered there.
  for (auto subject : {"waggle.node.rec1.ping", "waggle.cluster.ping"}) {
    auto in = find_line(lines, {"\"input\"", std::string{"[\""} + subject + "\"", "_INBOX."});
    auto answer = find_line(lines, {"\"bus_out\"", "bus_publish", "[\"_INBOX.", "\\\"node\\\":\\\"rec1\\\""}, in);
    EXPECT_GT(answer, in);
  }
  // A probe published, then back.
  auto sent = find_line(lines, {"\"bus_out\"", "bus_publish", "[\"waggle.node.rec1.probe\""});
  find_line(lines, {"\"input\"", "[\"waggle.node.rec1.probe\""}, sent);
  auto out = replay_lines(lines, {.strict = true});
  EXPECT_TRUE(out.identical) << out.summary();
}

// The recording of a bus input removed (as a probe that did not record the
// ping it took): the replayed probe never answers, and the replay stops at
// the answer the live one sent.
TEST(BusTraceTest, ABusInputLeftOutOfTheTraceIsADivergenceAtWhatItCaused) {
  auto lines = bus_trace();
  auto in = find_line(lines, {"\"input\"", "[\"waggle.node.rec1.ping\""});
  auto answer = find_line(lines, {"\"bus_out\"", "bus_publish", "[\"_INBOX."}, in);
  auto seq_of = [](const std::string& line) {
    rapidjson::Document doc;
    doc.Parse(line.c_str());
    return doc["seq"].GetUint64();
  };
  auto expected = seq_of(lines[answer]);
  lines.erase(lines.begin() + static_cast<std::ptrdiff_t>(in));
  auto out = replay_lines(lines, {.strict = true});
  ASSERT_TRUE(out.divergence) << out.summary();
  // The ping's clock-free answer is the first thing missing (or, strictly, a
  // reading the replay no longer takes in its place).
  EXPECT_EQ(out.divergence->actor, "bus_probe");
  EXPECT_LE(out.divergence->seq, expected);
}

// What the probe does with a delivery is pinned: the answer goes to the
// reply_to the ping carried.
TEST(BusTraceTest, AnotherReplyToInTheTraceIsADivergenceAtTheAnswer) {
  auto lines = bus_trace();
  auto in = find_line(lines, {"\"input\"", "[\"waggle.node.rec1.ping\""});
  auto at = lines[in].find("_INBOX.");
  lines[in].replace(at, 7, "_INBOX.X");
  auto out = replay_lines(lines, {.strict = true});
  ASSERT_TRUE(out.divergence) << out.summary();
  EXPECT_EQ(out.divergence->kind, "bus_out");
}

}  // namespace
}  // namespace waggle
