// Red team of issue 16 (fanout16): what a live event's shared frame counts
// against the session's byte cap (out_frame::size(), the head, the raw JSON
// and the tail) against what the frame keeps alive. send_live shared the
// event's JSON through an aliasing pointer to the whole proto::event, so a
// queued frame pinned the parsed tags and content as well as `raw` (now it
// shares the hub's one copy of the JSON, live_event::raw). An event
// of many tiny tags (no limit on their number, 64 KB frames) parses to about
// ten times its JSON: a non-reading client at its 8 MiB cap then holds
// about 100 MB, and the node-wide budget (256 MiB) about 2.5 GB.

#include <malloc.h>

#include "actors/connection/connection_actor.hpp"
#include "actors/fanout/hub_actor.hpp"
#include "tests/actors/actor_fixture.hpp"
#include "tests/support/event_builder.hpp"

using namespace waggle;
using namespace waggle::testing;

namespace {

constexpr int64_t now = 1'700'000'000;
const std::string alice_sk(64, '1');
const std::string bob_sk(64, '2');

// Keeps each frame as the session would queue it (shared parts shared).
struct frame_keeping_sink : socket_sink {
  std::vector<out_frame> frames;
  void send_text(std::string frame) override { frames.emplace_back(std::move(frame)); }
  void send_frame(out_frame frame) override { frames.push_back(std::move(frame)); }
  void close(uint16_t, std::string) override {}
};

std::size_t heap_in_use() { return mallinfo2().uordblks; }

class shared_frame_memory : public actor_test {
 protected:
  shared_frame_memory() {
    ingest_raw = spawn(fake_ingest, ingest_log);
    reader_raw = spawn(fake_reader, reader_log);
    reader = caf::actor_cast<reader_pool_actor>(reader_raw);
    hub = spawn(hub_actor_impl, test_env());
    run();
  }
  ~shared_frame_memory() override { reader_log->held_requests.clear(); }

  connection_actor open_authed() {
    connection_settings settings;
    settings.community_id = 1;
    settings.host = "chat.example";
    settings.reads.max_in_flight = 1000;
    auto conn = spawn(connection_actor_impl, settings,
                      connection_peers{caf::actor_cast<ingest_actor>(ingest_raw), hub, reader, {}, {}, {}}, test_env(now), sink);
    run();
    auto auth = test::event_builder{alice_sk}.kind(22242).content("").at(now)
                  .tags({{"relay", "ws://chat.example:7777/"}, {"challenge", "challenge-1"}})
                  .sign();
    caf::anon_send(conn, socket_frame{"[\"AUTH\"," + auth.raw + "]"});
    run();
    return conn;
  }

  std::shared_ptr<frame_keeping_sink> sink = std::make_shared<frame_keeping_sink>();
  std::shared_ptr<fake_ingest_log> ingest_log = std::make_shared<fake_ingest_log>();
  std::shared_ptr<fake_reader_log> reader_log = std::make_shared<fake_reader_log>();
  caf::actor ingest_raw;
  caf::actor reader_raw;
  reader_pool_actor reader;
  hub_actor hub;
};

TEST_F(shared_frame_memory, a_queued_live_frame_pins_no_more_than_it_counts) {
  auto conn = open_authed();
  caf::anon_send(conn, socket_frame{R"(["REQ","s1",{"kinds":[1]}])"});
  run();
  ASSERT_EQ(reader_log->held_requests.size(), 1u);
  caf::anon_send(reader_raw, caf::atom("reply"), std::vector<std::string>{});
  run();
  sink->frames.clear();  // AUTH challenge, OK, EOSE

  // 8,000 one-letter tags: 48 KB of JSON, inside a 64 KB frame.
  std::vector<proto::tag> tags(8000, proto::tag{"x"});
  auto ev = std::make_shared<const proto::event>(
    test::event_builder{bob_sk}.kind(1).content("tags").tags(std::move(tags)).at(now).sign());
  caf::anon_send(hub, committed_events{{ingest_item{1, ev}}});
  run();
  ASSERT_EQ(sink->frames.size(), 1u);
  const std::size_t counted = sink->frames[0].size();
  ASSERT_EQ(sink->frames[0].flatten(), proto::render_event("s1", ev->raw));
  ev.reset();  // the hub's batch is gone too: the queued frame is the event's last holder

  // What dropping the queued frame gives back is what it held.
  const std::size_t before = heap_in_use();
  sink->frames.clear();
  const std::size_t pinned = before - heap_in_use();
  std::printf("[ figures  ] a live frame counts %zu bytes and pins %zu (%.1fx)\n", counted,
              pinned, double(pinned) / double(counted));
  EXPECT_LE(pinned, 2 * counted)
    << "the byte cap counts " << counted << " bytes for a frame that keeps " << pinned
    << " alive: the cap bounds a fraction of the memory a non-reading client holds";
}

}  // namespace
