// A connection's read admission (docs/protocol.md, "Read limits"): at most
// max_in_flight REQ/COUNT reads at once, refused beyond with CLOSED
// rate-limited:, and the reads of a closed, replaced or disconnected
// subscription withdrawn at the pool. Driven by test_coordinator with a fake
// pool that holds every history read.
//
// Red check: on the base connection actor the ninth REQ was registered and
// its history read sent (9 held reads, no CLOSED), and nothing was ever
// withdrawn.

#include "actors/connection/connection_actor.hpp"
#include "actors/fanout/hub_actor.hpp"
#include "messages/proto/client_message.hpp"
#include "tests/actors/actor_fixture.hpp"
#include "tests/support/event_builder.hpp"

using namespace waggle;
using namespace waggle::testing;

namespace {

constexpr int64_t now = 1'700'000'000;
const std::string alice_sk(64, '1');

std::string auth_frame(const std::string& challenge) {
  auto ev = test::event_builder{alice_sk}
              .kind(22242)
              .tags({{"relay", "ws://chat.example:7777/"}, {"challenge", challenge}})
              .at(now)
              .sign();
  return "[\"AUTH\"," + ev.raw + "]";
}

class read_admission_test : public actor_test {
 protected:
  read_admission_test() {
    ingest_raw = spawn(fake_ingest, ingest_log);
    reader_raw = spawn(fake_reader, reader_log);
    hub = spawn(hub_actor_impl, test_env());
    run();
  }
  ~read_admission_test() override { reader_log->held_requests.clear(); }

  connection_actor open_authed(size_t max_in_flight) {
    connection_settings settings;
    settings.community_id = 1;
    settings.host = "chat.example";
    settings.reads.max_in_flight = max_in_flight;
    conn = spawn(connection_actor_impl, settings,
                 connection_peers{caf::actor_cast<ingest_actor>(ingest_raw), hub,
                                  caf::actor_cast<reader_pool_actor>(reader_raw), {}, {}, {}},
                 test_env(now), sink);
    run();
    send(auth_frame("challenge-1"));
    sink->take();
    return conn;
  }
  void send(std::string text) {
    caf::anon_send(conn, socket_frame{std::move(text)});
    run();
  }

  std::shared_ptr<fake_ingest_log> ingest_log = std::make_shared<fake_ingest_log>();
  std::shared_ptr<fake_reader_log> reader_log = std::make_shared<fake_reader_log>();
  std::shared_ptr<recording_sink> sink = std::make_shared<recording_sink>();
  caf::actor ingest_raw, reader_raw;
  hub_actor hub;
  connection_actor conn;
};

}  // namespace

TEST_F(read_admission_test, ReadsBeyondTheBoundAreRefusedAndCountedNotSent) {
  open_authed(3);
  send(R"(["REQ","s1",{"kinds":[1]}])");
  send(R"(["REQ","s2",{"kinds":[1]}])");
  send(R"(["REQ","s3",{"kinds":[1]}])");
  EXPECT_EQ(reader_log->held_requests.size(), 3u);
  send(R"(["REQ","s4",{"kinds":[1]}])");
  send(R"(["COUNT","c1",{"kinds":[1]}])");
  EXPECT_EQ(sink->take(),
            (std::vector<std::string>{
              R"(["CLOSED","s4","rate-limited: too many queries in flight"])",
              R"(["CLOSED","c1","rate-limited: too many queries in flight"])"}));
  EXPECT_EQ(reader_log->held_requests.size(), 3u);
  // Answering one frees its slot.
  caf::anon_send(reader_raw, caf::atom("reply"), std::vector<std::string>{});
  run();
  EXPECT_EQ(sink->take(), std::vector<std::string>{R"(["EOSE","s1"])"});
  send(R"(["REQ","s5",{"kinds":[1]}])");
  EXPECT_EQ(reader_log->held_requests.size(), 3u);
  EXPECT_TRUE(sink->take().empty());
}

TEST_F(read_admission_test, ClosedReplacedAndDisconnectedReadsAreWithdrawn) {
  open_authed(8);
  send(R"(["REQ","s1",{"kinds":[1]}])");
  send(R"(["REQ","s2",{"kinds":[1]}])");
  ASSERT_EQ(reader_log->held_requests.size(), 2u);
  send(R"(["CLOSE","s1"])");
  ASSERT_EQ(reader_log->withdrawals.size(), 1u);
  EXPECT_FALSE(reader_log->withdrawals[0].all);
  EXPECT_EQ(reader_log->withdrawals[0].requests.size(), 1u);
  // A REQ on the same id replaces s2: its read is withdrawn too, and the
  // replacement takes its slot instead of adding one.
  send(R"(["REQ","s2",{"kinds":[2]}])");
  ASSERT_EQ(reader_log->withdrawals.size(), 2u);
  EXPECT_EQ(reader_log->withdrawals[1].requests.size(), 1u);
  EXPECT_NE(reader_log->withdrawals[1].requests[0], reader_log->withdrawals[0].requests[0]);
  caf::anon_send(conn, socket_closed{});
  run();
  ASSERT_EQ(reader_log->withdrawals.size(), 3u);
  EXPECT_TRUE(reader_log->withdrawals[2].all);
}

TEST_F(read_admission_test, ABurstBeyondTheConnectionBucketIsRefused) {
  connection_settings settings;
  settings.community_id = 1;
  settings.host = "chat.example";
  settings.reads.per_connection = {1, 5};  // 5 tokens, one a second
  conn = spawn(connection_actor_impl, settings,
               connection_peers{caf::actor_cast<ingest_actor>(ingest_raw), hub,
                                caf::actor_cast<reader_pool_actor>(reader_raw), {}, {}, {}},
               test_env(now), sink);
  run();
  send(auth_frame("challenge-1"));
  sink->take();
  send(R"(["COUNT","c1",{"kinds":[1]}])");  // costs 2.01
  send(R"(["COUNT","c2",{"kinds":[1]}])");
  send(R"(["COUNT","c3",{"kinds":[1]}])");
  auto frames = sink->take();
  ASSERT_EQ(frames.size(), 3u);
  EXPECT_EQ(frames[2], R"(["CLOSED","c3","rate-limited: too many queries on this connection, slow down"])");
  // The test coordinator's clock is the bucket's: two seconds refill it.
  sched().advance_time(std::chrono::seconds(2));
  send(R"(["COUNT","c4",{"kinds":[1]}])");
  frames = sink->take();
  ASSERT_EQ(frames.size(), 1u);
  EXPECT_EQ(frames[0].rfind(R"(["COUNT","c4")", 0), 0u) << frames[0];
}
