// Ephemeral events (20000-29999) on a connection, under test_coordinator
// with a fake hub that holds its acks and a fake pool that holds access
// checks (issue 13):
// - each one counts in flight until the hub has fanned it out, so a flood
//   meets --max-events-in-flight (OK false rate-limited:) like stored events;
// - the access check of one in a channel is a read: it takes one of the
//   connection's --max-reads-in-flight slots, and is withdrawn at the pool
//   when the socket closes or the check times out.
//
// Red checks: without the in-flight count in hand_to_hub the fifth event
// went to the hub (5 held acks, no refusal); with the access check outside
// read admission the third typing event's check went to the pool (3 held
// checks, no refusal) and closing the socket withdrew nothing.

#include <deque>

#include "actors/connection/connection_actor.hpp"
#include "messages/proto/client_message.hpp"
#include "tests/actors/actor_fixture.hpp"
#include "tests/support/event_builder.hpp"

using namespace waggle;
using namespace waggle::testing;

namespace {

constexpr int64_t now = 1'700'000'000;
const std::string alice_sk(64, '1');

// A hub that holds each ephemeral_publish until told ("ack") to answer the
// oldest, as a hub with a long mailbox would.
struct fake_hub_log {
  struct held {
    ephemeral_publish msg;
    caf::typed_response_promise<hub_ack> promise;
  };
  std::deque<held> held_publishes;
};

caf::behavior fake_hub(caf::event_based_actor* self, std::shared_ptr<fake_hub_log> log) {
  return {
    [self, log](ephemeral_publish& msg) {
      auto promise = self->make_response_promise<hub_ack>();
      log->held_publishes.push_back({std::move(msg), promise});
      return promise;
    },
    [log](caf::atom_value) {
      auto h = std::move(log->held_publishes.front());
      log->held_publishes.pop_front();
      h.promise.deliver(hub_ack{});
    },
  };
}

class ephemeral_test : public actor_test {
 protected:
  ephemeral_test() {
    ingest_raw = spawn(fake_ingest, ingest_log);
    reader_raw = spawn(fake_reader, reader_log);
    hub_raw = spawn(fake_hub, hub_log);
    run();
  }
  ~ephemeral_test() override {
    hub_log->held_publishes.clear();
    reader_log->access_requests.clear();
  }

  void open_authed(size_t max_events_in_flight, size_t max_reads_in_flight) {
    settings.community_id = 1;
    settings.host = "chat.example";
    settings.max_events_in_flight = max_events_in_flight;
    settings.reads.max_in_flight = max_reads_in_flight;
    conn = spawn(connection_actor_impl, settings,
                 connection_peers{caf::actor_cast<ingest_actor>(ingest_raw),
                                  caf::actor_cast<hub_actor>(hub_raw),
                                  caf::actor_cast<reader_pool_actor>(reader_raw), {}, {}, {}},
                 env, sink);
    run();
    auto auth = test::event_builder{alice_sk}
                  .kind(22242)
                  .tags({{"relay", "ws://chat.example/"}, {"challenge", "challenge-1"}})
                  .at(now)
                  .sign();
    send("[\"AUTH\"," + auth.raw + "]");
    sink->take();
  }
  void send(std::string text) {
    caf::anon_send(conn, socket_frame{std::move(text)});
    run();
  }
  proto::event ephemeral(const std::string& content, std::vector<proto::tag> tags = {}) {
    return test::event_builder{alice_sk}.kind(20002).content(content).tags(std::move(tags))
      .at(now).sign();
  }
  std::string event_frame(const proto::event& ev) { return "[\"EVENT\"," + ev.raw + "]"; }
  void ack_next() {
    caf::anon_send(hub_raw, caf::atom("ack"));
    run();
  }
  void grant_next(const std::string& channel) {
    caf::anon_send(reader_raw, caf::atom("access"),
                   access_reply{{{channel, false, {proto::pubkey_of(alice_sk)}}}, {}, {}});
    run();
  }

  connection_settings settings;
  node_env env = test_env(now);
  std::shared_ptr<fake_ingest_log> ingest_log = std::make_shared<fake_ingest_log>();
  std::shared_ptr<fake_reader_log> reader_log = std::make_shared<fake_reader_log>();
  std::shared_ptr<fake_hub_log> hub_log = std::make_shared<fake_hub_log>();
  std::shared_ptr<recording_sink> sink = std::make_shared<recording_sink>();
  caf::actor ingest_raw, reader_raw, hub_raw;
  connection_actor conn;
};

}  // namespace

TEST_F(ephemeral_test, EphemeralEventsBeyondTheInFlightCapAreRateLimitedWhileTheHubHoldsAcks) {
  open_authed(4, 8);
  std::vector<proto::event> sent;
  for (int i = 0; i < 4; ++i) {
    sent.push_back(ephemeral("typing " + std::to_string(i)));
    send(event_frame(sent.back()));
  }
  EXPECT_EQ(hub_log->held_publishes.size(), 4u);
  EXPECT_TRUE(sink->take().empty()) << "OK before the hub fanned out";
  auto over = ephemeral("over");
  send(event_frame(over));
  EXPECT_EQ(sink->take(), std::vector<std::string>{proto::render_ok(
                            over.id, false,
                            "rate-limited: too many events awaiting commit on this connection")});
  EXPECT_EQ(hub_log->held_publishes.size(), 4u) << "the refused event reached the hub";
  EXPECT_NE(env.stats->render().find("waggle_refusals_total{reason=\"ephemeral_in_flight\"} 1"),
            std::string::npos);
  // An ack frees a slot: its OK, and the next event goes through.
  ack_next();
  EXPECT_EQ(sink->take(), std::vector<std::string>{proto::render_ok(sent[0].id, true, "")});
  auto next = ephemeral("next");
  send(event_frame(next));
  EXPECT_TRUE(sink->take().empty());
  EXPECT_EQ(hub_log->held_publishes.size(), 4u);
}

TEST_F(ephemeral_test, ChannelAccessChecksTakeReadSlotsAndAreWithdrawnWhenTheSocketCloses) {
  open_authed(512, 2);
  auto t1 = ephemeral("1", {{"h", "ops"}});
  auto t2 = ephemeral("2", {{"h", "ops"}});
  auto t3 = ephemeral("3", {{"h", "ops"}});
  send(event_frame(t1));
  send(event_frame(t2));
  send(event_frame(t3));
  EXPECT_EQ(reader_log->access_requests.size(), 2u) << "a third check went to the pool";
  EXPECT_EQ(sink->take(), std::vector<std::string>{proto::render_ok(
                            t3.id, false, "rate-limited: too many queries in flight")});
  // The slots are the ones REQ and COUNT use.
  send(R"(["COUNT","c",{"kinds":[1]}])");
  EXPECT_EQ(sink->take(),
            std::vector<std::string>{R"(["CLOSED","c","rate-limited: too many queries in flight"])"});
  // An answered check gives its slot back, and the event goes on to the hub.
  grant_next("ops");
  EXPECT_EQ(hub_log->held_publishes.size(), 1u);
  auto t4 = ephemeral("4", {{"h", "ops"}});
  send(event_frame(t4));
  EXPECT_EQ(reader_log->access_requests.size(), 2u);
  EXPECT_TRUE(reader_log->withdrawals.empty());
  caf::anon_send(conn, socket_closed{});
  run();
  ASSERT_EQ(reader_log->withdrawals.size(), 1u) << "the queued checks were left at the pool";
  EXPECT_TRUE(reader_log->withdrawals[0].all);
}

TEST_F(ephemeral_test, ATimedOutAccessCheckIsWithdrawnAndFreesItsSlot) {
  open_authed(512, 1);
  auto t1 = ephemeral("1", {{"h", "ops"}});
  send(event_frame(t1));
  ASSERT_EQ(reader_log->access_requests.size(), 1u);
  sched().advance_time(settings.read_timeout);
  run();
  EXPECT_EQ(sink->take(), std::vector<std::string>{proto::render_ok(
                            t1.id, false, "error: access check failed")});
  ASSERT_EQ(reader_log->withdrawals.size(), 1u);
  EXPECT_FALSE(reader_log->withdrawals[0].all);
  EXPECT_EQ(reader_log->withdrawals[0].requests.size(), 1u);
  auto t2 = ephemeral("2", {{"h", "ops"}});
  send(event_frame(t2));
  EXPECT_TRUE(sink->take().empty()) << "the timed-out check kept its slot";
}
