// The hub's direct way to a live subscription's socket (live_gate.hpp): the
// gate alone, then the real hub and a connection actor interleaved message by
// message under test_coordinator, for the three orders it must keep: a
// revocation before any later event, an event the actor holds before the
// next direct one, and nothing after a CLOSE.

#include <condition_variable>
#include <deque>
#include <set>
#include <thread>

#include "actors/connection/connection_actor.hpp"
#include "actors/connection/live_gate.hpp"
#include "actors/fanout/hub_actor.hpp"
#include "messages/proto/client_message.hpp"
#include "tests/actors/actor_fixture.hpp"
#include "tests/support/event_builder.hpp"

using namespace waggle;
using namespace waggle::testing;

namespace {

constexpr int64_t now = 1'700'000'000;
const std::string alice_sk(64, '1');
const std::string bob_sk(64, '2');
const std::string relay_sk(64, '9');

proto::event make_event(const std::string& sk, int32_t kind, std::vector<proto::tag> tags = {},
                        std::string content = "") {
  return test::event_builder{sk}.kind(kind).tags(std::move(tags)).content(std::move(content))
    .at(now).sign();
}

// ---- the gate alone ----------------------------------------------------------------

struct offered {
  std::vector<std::string> sub_ids;
  std::vector<uint64_t> generations;
  bool left = false;
};

offered offer(live_gate& gate, std::vector<std::string> subs, std::vector<uint64_t> gens,
              const proto::event& ev) {
  offered o{std::move(subs), std::move(gens), false};
  o.left = gate.offer(o.sub_ids, o.generations, ev.id, std::make_shared<const std::string>(ev.raw));
  return o;
}

history_ids_ptr history_of(std::initializer_list<const proto::event*> events) {
  auto ids = std::make_shared<std::vector<event_id_bin>>();
  for (auto* ev : events) {
    event_id_bin bin;
    EXPECT_TRUE(id_from_hex(ev->id, bin));
    ids->push_back(bin);
  }
  std::sort(ids->begin(), ids->end());
  return ids;
}

TEST(LiveGate, WritesOpenSubscriptionsAtTheirGenerationAndLeavesTheRestToTheActor) {
  auto sink = std::make_shared<recording_sink>();
  live_gate gate{sink};
  auto ev = make_event(bob_sk, 1, {}, "hello");
  gate.open("a", 3, nullptr);
  auto o = offer(gate, {"a", "b", "a"}, {3, 1, 2}, ev);
  EXPECT_EQ(sink->take(), std::vector<std::string>{proto::render_event("a", ev.raw)});
  EXPECT_TRUE(o.left);
  EXPECT_EQ(o.sub_ids, (std::vector<std::string>{"b", "a"}));  // not open; an older generation
  EXPECT_EQ(o.generations, (std::vector<uint64_t>{1, 2}));
  // The actor now owes the hub that live_event: nothing goes direct meanwhile.
  EXPECT_FALSE(gate.open_for("a", 3));
  auto later = offer(gate, {"a"}, {3}, make_event(bob_sk, 1, {}, "later"));
  EXPECT_TRUE(later.left);
  EXPECT_TRUE(sink->take().empty());
  gate.taken();
  EXPECT_FALSE(gate.open_for("a", 3)) << "the second live_event is still owed";
  gate.taken();
  EXPECT_TRUE(gate.open_for("a", 3));
}

TEST(LiveGate, AnEventItsHistoryCarriedIsNotSentAgain) {
  auto sink = std::make_shared<recording_sink>();
  live_gate gate{sink};
  auto seen = make_event(bob_sk, 1, {}, "in the history");
  auto fresh = make_event(bob_sk, 1, {}, "new");
  gate.open("a", 1, history_of({&seen}));
  auto o = offer(gate, {"a"}, {1}, seen);
  EXPECT_FALSE(o.left);
  EXPECT_TRUE(o.sub_ids.empty());
  EXPECT_TRUE(sink->take().empty());
  offer(gate, {"a"}, {1}, fresh);
  EXPECT_EQ(sink->take(), std::vector<std::string>{proto::render_event("a", fresh.raw)});
}

TEST(LiveGate, ARevocationOwedHoldsTheGateUntilTaken) {
  auto sink = std::make_shared<recording_sink>();
  live_gate gate{sink};
  gate.open("a", 1, nullptr);
  gate.owe();
  auto ev = make_event(bob_sk, 1);
  EXPECT_TRUE(offer(gate, {"a"}, {1}, ev).left);
  EXPECT_TRUE(sink->take().empty());
  gate.taken();
  gate.taken();
  EXPECT_FALSE(offer(gate, {"a"}, {1}, ev).left);
  EXPECT_EQ(sink->take().size(), 1u);
}

TEST(LiveGate, AShutSubscriptionAndAClosedGateGetNothingDirect) {
  auto sink = std::make_shared<recording_sink>();
  live_gate gate{sink};
  auto ev = make_event(bob_sk, 1);
  gate.open("a", 1, nullptr);
  gate.shut("a");
  EXPECT_TRUE(offer(gate, {"a"}, {1}, ev).left) << "the actor decides (stale)";
  gate.taken();
  gate.open("b", 1, nullptr);
  gate.close();
  auto o = offer(gate, {"b"}, {1}, ev);
  EXPECT_FALSE(o.left) << "the actor is gone: nothing to send it";
  EXPECT_TRUE(o.sub_ids.empty());
  EXPECT_TRUE(sink->take().empty());
}

TEST(LiveGate, ManySubscriptionsOfOneConnectionForOneEventGoThroughTheActor) {
  auto sink = std::make_shared<recording_sink>();
  live_gate gate{sink};
  std::vector<std::string> subs;
  std::vector<uint64_t> gens;
  for (size_t k = 0; k <= live_gate::max_direct_per_event; ++k) {
    subs.push_back("s" + std::to_string(k));
    gens.push_back(1);
    gate.open(subs.back(), 1, nullptr);
  }
  auto o = offer(gate, subs, gens, make_event(bob_sk, 1));
  EXPECT_TRUE(o.left);
  EXPECT_EQ(o.sub_ids, subs);
  EXPECT_TRUE(sink->take().empty()) << "the hub's thread wrote a frame per subscription";
}

// The hub and an actor on two real threads (run it under TSan too): the hub
// offers 50,000 events to two live subscriptions and now and then owes a
// revocation; the actor, as the connection actor does, writes what it is
// handed and gives each message back, and half way shuts "b" and says
// CLOSED. Every event of "a" arrives once and in order; none of "b" after
// its CLOSED.
TEST(LiveGate, TheHubsOrderHoldsAcrossThreadsAndNothingFollowsAClosed) {
  struct locked_sink : socket_sink {
    std::mutex m;
    std::vector<std::string> frames;
    void send_text(std::string f) override {
      std::lock_guard l{m};
      frames.push_back(std::move(f));
    }
    void close(uint16_t, std::string) override {}
  };
  auto sink = std::make_shared<locked_sink>();
  live_gate gate{sink};
  gate.open("a", 1, nullptr);
  gate.open("b", 1, nullptr);
  struct msg {
    int n;  // -1: a revocation
    std::vector<std::string> subs;
    std::vector<uint64_t> gens;
  };
  std::mutex mm;
  std::condition_variable cv;
  std::deque<msg> box;
  bool done = false;
  auto post = [&](msg m) {
    {
      std::lock_guard l{mm};
      box.push_back(std::move(m));
    }
    cv.notify_one();
  };
  const auto closed_b = proto::render_closed("b", "");
  std::thread actor([&] {
    std::set<std::string> live{"a", "b"};
    for (int handled = 0;; ++handled) {
      std::unique_lock l{mm};
      cv.wait(l, [&] { return done || !box.empty(); });
      if (box.empty())
        return;
      auto m = std::move(box.front());
      box.pop_front();
      l.unlock();
      for (size_t k = 0; k < m.subs.size(); ++k)
        if (m.n > 0 && live.count(m.subs[k]) && m.gens[k] == 1)
          sink->send_text(proto::render_event(m.subs[k], std::to_string(m.n)));
      if (handled == 300 && live.erase("b")) {
        gate.shut("b");
        sink->send_text(closed_b);
      }
      gate.taken();
    }
  });
  const std::string id(64, '0');
  for (int n = 1; n <= 50000; ++n) {
    if (n % 41 == 0) {
      gate.owe();
      post({-1, {}, {}});
    }
    std::vector<std::string> subs{"a", "b"};
    std::vector<uint64_t> gens{1, n % 7 ? 1u : 2u};  // now and then a stale "b"
    if (gate.offer(subs, gens, id, std::make_shared<const std::string>(std::to_string(n))))
      post({n, std::move(subs), std::move(gens)});
  }
  {
    std::lock_guard l{mm};
    done = true;
  }
  cv.notify_one();
  actor.join();
  int last_a = 0;
  bool b_closed = false;
  for (auto& f : sink->frames) {
    if (f == closed_b) {
      b_closed = true;
      continue;
    }
    int n = std::stoi(f.substr(f.rfind(',') + 1));
    if (f.substr(10, 1) == "a") {
      ASSERT_EQ(n, last_a + 1) << "out of order or twice";
      last_a = n;
    } else {
      ASSERT_FALSE(b_closed) << f << " after CLOSED";
    }
  }
  EXPECT_EQ(last_a, 50000);
  EXPECT_TRUE(b_closed);
}

// ---- the hub and a connection, message by message ---------------------------------

class direct_live_test : public actor_test {
 protected:
  direct_live_test() : actor_test(1) {
    ingest_raw = spawn(fake_ingest, ingest_log);
    reader_raw = spawn(fake_reader, reader_log);
    group_raw = spawn(fake_group, group_log);
    hub = spawn(hub_actor_impl, test_env());
    run();
  }
  ~direct_live_test() override {
    ingest_log->held_requests.clear();
    reader_log->held_requests.clear();
    reader_log->access_requests.clear();
    group_log->held_requests.clear();
  }

  // A connection with the direct path on, on which alice authenticated.
  void open_alice() {
    connection_settings settings;
    settings.community_id = 1;
    settings.host = "chat.example";
    settings.relay_pubkey = proto::pubkey_of(relay_sk);
    settings.direct_live = true;
    sink = std::make_shared<recording_sink>();
    conn = spawn(connection_actor_impl, settings,
                 connection_peers{caf::actor_cast<ingest_actor>(ingest_raw), hub,
                                  caf::actor_cast<reader_pool_actor>(reader_raw),
                                  caf::actor_cast<group_actor>(group_raw), {}, {}},
                 test_env(now), sink);
    run();
    auto auth = make_event(alice_sk, 22242,
                           {{"relay", "ws://chat.example/"}, {"challenge", "challenge-1"}});
    frame_in("[\"AUTH\"," + auth.raw + "]");
    sink->take();
  }
  void frame_in(std::string text) {
    caf::anon_send(conn, socket_frame{std::move(text)});
    run();
  }
  // Sub "s" on private channel "ops" (alice a member), through its EOSE.
  void subscribed_to_ops() {
    open_alice();
    frame_in(R"(["REQ","s",{"#h":["ops"]}])");
    caf::anon_send(reader_raw, caf::atom("access"),
                   access_reply{{channel_grant{"ops", false, {alice}}}, {}, {}});
    run();
    caf::anon_send(reader_raw, caf::atom("reply"), std::vector<std::string>{});
    run();
    ASSERT_EQ(sink->take(), std::vector<std::string>{proto::render_eose("s")});
  }
  // Hands `msg` to the hub and lets only the hub take it.
  template <class Msg>
  void hub_takes(Msg msg) {
    caf::anon_send(hub, std::move(msg));
    ASSERT_TRUE(sched().prioritize(hub));
    sched().run_once();
  }
  proto::event post(const std::string& text) {
    return make_event(bob_sk, 9, {{"h", "ops"}}, text);
  }
  static committed_events committed(const proto::event& ev) {
    return committed_events{{ingest_item{1, std::make_shared<const proto::event>(ev)}}};
  }

  std::shared_ptr<fake_ingest_log> ingest_log = std::make_shared<fake_ingest_log>();
  std::shared_ptr<fake_reader_log> reader_log = std::make_shared<fake_reader_log>();
  std::shared_ptr<fake_group_log> group_log = std::make_shared<fake_group_log>();
  caf::actor ingest_raw, reader_raw, group_raw;
  hub_actor hub;
  connection_actor conn;
  std::shared_ptr<recording_sink> sink;
  const std::string alice = proto::pubkey_of(alice_sk);
};

TEST_F(direct_live_test, ALiveSubscriptionsEventsAreWrittenByTheHubAfterItsEose) {
  open_alice();
  frame_in(R"(["REQ","s",{"#h":["ops"]}])");
  caf::anon_send(reader_raw, caf::atom("access"),
                 access_reply{{channel_grant{"ops", false, {alice}}}, {}, {}});
  run();
  auto early = post("while the history loads");
  caf::anon_send(hub, committed(early));
  run();
  EXPECT_TRUE(sink->take().empty()) << "held until EOSE";
  caf::anon_send(reader_raw, caf::atom("reply"), std::vector<std::string>{});
  run();
  EXPECT_EQ(sink->take(), (std::vector<std::string>{proto::render_eose("s"),
                                                    proto::render_event("s", early.raw)}));
  auto live = post("live");
  hub_takes(committed(live));
  // Only the hub ran: the frame is already at the socket.
  EXPECT_EQ(sink->take(), std::vector<std::string>{proto::render_event("s", live.raw)});
}

TEST_F(direct_live_test, ARemovalIsActedOnBeforeAnyLaterEventOfTheChannel) {
  subscribed_to_ops();
  hub_takes(channel_revoked{1, "ops", alice, false});  // the actor has not taken it yet
  hub_takes(committed(post("after the removal")));
  EXPECT_TRUE(sink->take().empty()) << "a removed member got a later event of the channel";
  run();
  EXPECT_EQ(sink->take(), std::vector<std::string>{proto::render_closed(
                            "s", "restricted: no longer a member of private channel ops")});
}

TEST_F(direct_live_test, AnEventTheActorHoldsIsNotOvertakenByTheNextDirectOne) {
  subscribed_to_ops();
  // A revocation for someone else: it ends nothing here, but until the actor
  // takes it the hub sends through the actor.
  hub_takes(channel_revoked{1, "ops", proto::pubkey_of(bob_sk), false});
  auto first = post("first");
  hub_takes(committed(first));
  ASSERT_TRUE(sched().prioritize(conn));
  sched().run_once();  // the actor takes the revocation only (one message a run)
  auto second = post("second");
  hub_takes(committed(second));
  run();
  EXPECT_EQ(sink->take(), (std::vector<std::string>{proto::render_event("s", first.raw),
                                                    proto::render_event("s", second.raw)}));
}

TEST_F(direct_live_test, AnEventLeftToTheActorBeforeEoseIsNotOvertakenAfterIt) {
  open_alice();
  frame_in(R"(["REQ","s",{"#h":["ops"]}])");
  caf::anon_send(reader_raw, caf::atom("access"),
                 access_reply{{channel_grant{"ops", false, {alice}}}, {}, {}});
  run();
  // The history's answer is in the actor's mailbox before the event the hub
  // could not write (the subscription was not open yet).
  caf::anon_send(reader_raw, caf::atom("reply"), std::vector<std::string>{});
  ASSERT_TRUE(sched().prioritize(reader_raw));
  sched().run_once();
  auto first = post("first");
  hub_takes(committed(first));
  ASSERT_TRUE(sched().prioritize(conn));
  sched().run_once();  // EOSE: the gate opens, with "first" still in the mailbox
  auto second = post("second");
  hub_takes(committed(second));
  run();
  EXPECT_EQ(sink->take(), (std::vector<std::string>{proto::render_eose("s"),
                                                    proto::render_event("s", first.raw),
                                                    proto::render_event("s", second.raw)}));
}

TEST_F(direct_live_test, NothingIsWrittenForASubscriptionAfterItsClose) {
  subscribed_to_ops();
  // The CLOSE reaches the actor while the event is on its way to the hub;
  // the actor handles the CLOSE first.
  caf::anon_send(conn, socket_frame{R"(["CLOSE","s"])"});
  caf::anon_send(hub, committed(post("after the close")));
  ASSERT_TRUE(sched().prioritize(conn));
  sched().run_once();
  ASSERT_TRUE(sched().prioritize(hub));
  sched().run_once();  // the event, before the hub hears of the CLOSE
  run();
  EXPECT_TRUE(sink->take().empty());
}

TEST_F(direct_live_test, NoEventFollowsTheClosedOfARefusedReplacement) {
  subscribed_to_ops();
  frame_in(R"(["REQ","s",{"kinds":"x"}])");  // malformed: CLOSED "s"
  ASSERT_EQ(sink->take().size(), 1u);
  hub_takes(committed(post("after the CLOSED")));
  run();
  EXPECT_TRUE(sink->take().empty());
}

TEST_F(direct_live_test, AReplacedSubscriptionGetsNoEventOfItsOldGeneration) {
  subscribed_to_ops();
  // The event reaches the hub while it still indexes the first "s"; the
  // actor has taken the replacing REQ before the hub takes the event.
  auto old_one = post("matched by the old generation");
  caf::anon_send(hub, committed(old_one));
  caf::anon_send(conn, socket_frame{R"(["REQ","s",{"#h":["ops"],"kinds":[9]}])"});
  ASSERT_TRUE(sched().prioritize(conn));
  sched().run_once();  // the replacement: the old "s" is shut, an access check is asked
  ASSERT_TRUE(sched().prioritize(hub));
  sched().run_once();  // the event, matched by the old generation
  EXPECT_TRUE(sink->take().empty()) << "an event of the replaced subscription";
  run();
  caf::anon_send(reader_raw, caf::atom("access"),
                 access_reply{{channel_grant{"ops", false, {alice}}}, {}, {}});
  run();
  caf::anon_send(reader_raw, caf::atom("reply"), std::vector<std::string>{});
  run();
  EXPECT_EQ(sink->take(), std::vector<std::string>{proto::render_eose("s")});
  auto fresh = post("live for the new generation");
  hub_takes(committed(fresh));
  EXPECT_EQ(sink->take(), std::vector<std::string>{proto::render_event("s", fresh.raw)})
    << "the new generation is written directly";
}

}  // namespace
