// Trace sections (actors/trace/trace_recorder.hpp, docs/traces.md "Format"):
// an input's record and what the handler that took it made are one stretch
// of the trace, whatever other threads record meanwhile. A strict replay
// expects each frame while replaying the last input before it; the
// `trace-replay` stage of ./scripts/test failed now and then because the
// reader pool's reader_idle (sent by the reader session together with its
// reply) was recorded between a connection's reply_in and the frames it
// sent for that reply.

#include <chrono>
#include <filesystem>
#include <fstream>
#include <future>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "actors/trace/trace_recorder.hpp"

namespace waggle {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

std::vector<std::string> read_lines(const fs::path& p) {
  std::ifstream in{p};
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);)
    lines.push_back(line);
  return lines;
}

// What traced_reply asks of an actor: who sent the message it handles.
struct fake_self {
  caf::strong_actor_ptr current_sender() const { return nullptr; }
};

TEST(TraceSectionTest, ARecordFromAnotherThreadWaitsUntilTheReplyHandlerReturns) {
  auto path = fs::temp_directory_path() / ("waggle-section-" + std::to_string(::getpid()) + ".jsonl");
  {
    auto rec = std::make_shared<trace_recorder>(path.string(), 0);
    rec->start("{}");
    node_env env;
    env.trace = rec;
    auto conn = env.for_actor("conn-1");
    auto pool = env.for_actor("reader_pool");
    fake_self self;
    std::future<void> idle;
    auto handler = traced_reply<history_reply>(&self, conn, [&](history_reply&) {
      // The pool takes the session's reader_idle while the connection is
      // still handling the session's reply.
      idle = std::async(std::launch::async, [&] {
        pool.trace->record(pool.actor, "reader_idle", trace_fields{}.str("type", "0"));
      });
      // Held: it cannot be recorded before this handler returns. (Without
      // sections it is recorded at once; a slow machine that had not run it
      // yet would only let the order check below pass by luck.)
      EXPECT_EQ(idle.wait_for(200ms), std::future_status::timeout);
      rec->record(conn.actor, "frame_out", trace_fields{}.str("text", R"(["EOSE","notes"])"));
    });
    history_reply reply;
    handler(reply);
    idle.get();
  }
  auto lines = read_lines(path);
  fs::remove(path);
  ASSERT_EQ(lines.size(), 4u);
  EXPECT_EQ(lines[1], R"({"seq":1,"actor":"conn-1","kind":"reply_in","type":"history_reply","from":""})");
  EXPECT_EQ(lines[2], R"({"seq":2,"actor":"conn-1","kind":"frame_out","text":"[\"EOSE\",\"notes\"]"})");
  EXPECT_EQ(lines[3], R"({"seq":3,"actor":"reader_pool","kind":"reader_idle","type":"0"})");
}

// A section of a recorder that is not recording (before start, or a replay's
// port) holds nothing: records of other threads are not delayed.
TEST(TraceSectionTest, HoldsNothingWhenNotRecording) {
  auto path = fs::temp_directory_path() / ("waggle-section-off-" + std::to_string(::getpid()) + ".jsonl");
  auto rec = std::make_shared<trace_recorder>(path.string(), 0);
  trace_port_ptr port = rec;
  {
    trace_section section{port, true};
    auto other = std::async(std::launch::async, [&] { return rec->hold(); });
    EXPECT_FALSE(other.get());
  }
  rec.reset();
  port.reset();
  fs::remove(path);
}

}  // namespace
}  // namespace waggle
