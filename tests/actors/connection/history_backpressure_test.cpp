// The connection actor's subscription memory and large histories (issue 13,
// findings 3 and 4), under test_coordinator with a socket whose drain the
// test releases: a history larger than a slice goes out one slice per
// drain; REQs are charged to the connection's and the node's byte budgets
// and give their bytes back when replaced, closed, or their connection ends.
// The e2e tests (tests/e2e/large_history_e2e_test.cpp,
// subscription_memory_e2e_test.cpp) show the same through real sockets.

#include "actors/connection/connection_actor.hpp"
#include "actors/connection/subscription_memory.hpp"
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

proto::event make_event(const std::string& sk, int32_t kind, std::string content,
                        int64_t created_at = now) {
  return test::event_builder{sk}.kind(kind).content(std::move(content)).at(created_at).sign();
}

// A socket whose queue drains when the test says so.
struct gated_sink : recording_sink {
  std::vector<std::function<void(room)>> waiters;
  std::vector<std::size_t> limits;  // each waiter's bound on queued bytes
  void notify_drained(std::function<void(room)> done, std::size_t at_most_bytes) override {
    limits.push_back(at_most_bytes);
    waiters.push_back(std::move(done));
  }
};

class history_test : public actor_test {
 protected:
  history_test() {
    reader_raw = spawn(fake_reader, reader_log);
    ingest_raw = spawn(fake_ingest, ingest_log);
    hub = spawn(hub_actor_impl, test_env());
    run();
  }
  ~history_test() override { reader_log->held_requests.clear(); }

  connection_actor open(std::shared_ptr<gated_sink> sink, size_t max_bytes = 0,
                        std::function<void(connection_settings&)> tweak = {}) {
    connection_settings settings;
    settings.community_id = 1;
    settings.host = "chat.example";
    settings.history_slice_frames = 3;
    settings.max_subscription_bytes = max_bytes;
    settings.subscription_budget = budget;
    settings.max_history_bytes = 0;
    settings.history_stall = caf::timespan{0};
    if (tweak)
      tweak(settings);
    auto env = test_env(now);
    stats = env.stats;
    auto conn = spawn(connection_actor_impl, settings,
                      connection_peers{caf::actor_cast<ingest_actor>(ingest_raw), hub,
                                       caf::actor_cast<reader_pool_actor>(reader_raw), {}, {}, {}},
                      env, sink);
    run();
    sink->take();  // the challenge
    auto auth = test::event_builder{alice_sk}.kind(22242).at(now)
             .tags({{"relay", "ws://chat.example:7777/"}, {"challenge", "challenge-1"}}).sign();
    send(conn, "[\"AUTH\"," + auth.raw + "]");
    sink->take();
    return conn;
  }
  void send(const connection_actor& conn, std::string text) {
    caf::anon_send(conn, socket_frame{std::move(text)});
    run();
  }
  void history_next(std::vector<std::string> raws) {
    caf::anon_send(reader_raw, caf::atom("reply"), std::move(raws));
    run();
  }
  void page_next(std::vector<std::string> raws, bool more) {
    caf::anon_send(reader_raw, caf::atom("reply"), std::move(raws), more);
    run();
  }
  void drain(gated_sink& sink) {
    ASSERT_EQ(sink.waiters.size(), 1u);
    auto done = std::move(sink.waiters.front());
    sink.waiters.clear();
    done({100, 1u << 20});
    run();
  }

  bool refused(const std::string& label, int n) const {
    return stats->render().find("waggle_refusals_total{reason=\"" + label + "\"} "
                                + std::to_string(n))
           != std::string::npos;
  }
  // `n` events of bob's, newest first.
  std::vector<std::string> history_of(int n, const std::string& tag = "h") {
    std::vector<std::string> raws;
    for (int i = 0; i < n; ++i)
      raws.push_back(make_event(bob_sk, 1, tag + std::to_string(i), now - i).raw);
    return raws;
  }

  std::shared_ptr<memory_budget> budget = std::make_shared<memory_budget>(0);
  std::shared_ptr<waggle::metrics> stats;
  std::shared_ptr<fake_reader_log> reader_log = std::make_shared<fake_reader_log>();
  std::shared_ptr<fake_ingest_log> ingest_log = std::make_shared<fake_ingest_log>();
  caf::actor reader_raw;
  caf::actor ingest_raw;
  hub_actor hub;
};

TEST_F(history_test, a_history_larger_than_a_slice_goes_out_one_slice_per_drain) {
  auto sink = std::make_shared<gated_sink>();
  auto conn = open(sink);
  send(conn, R"(["REQ","s",{"kinds":[1]}])");
  std::vector<proto::event> events;
  std::vector<std::string> raws;
  for (int i = 0; i < 7; ++i) {
    events.push_back(make_event(bob_sk, 1, "h" + std::to_string(i), now - i));
    raws.push_back(events.back().raw);
  }
  history_next(raws);
  EXPECT_TRUE(sink->take().empty()) << "nothing before the socket says it has room";
  EXPECT_GT(budget->used(), 0u) << "the unsent history is charged to the node";
  // A live event meanwhile waits for EOSE; one already in the history is not sent twice.
  auto live = std::make_shared<const proto::event>(make_event(bob_sk, 1, "live"));
  caf::anon_send(hub, committed_events{{ingest_item{1, live},
                                        ingest_item{1, std::make_shared<const proto::event>(events[6])}}});
  run();
  EXPECT_TRUE(sink->take().empty());
  drain(*sink);
  EXPECT_EQ(sink->take(), (std::vector<std::string>{proto::render_event("s", raws[0]),
                                                   proto::render_event("s", raws[1]),
                                                   proto::render_event("s", raws[2])}));
  drain(*sink);
  EXPECT_EQ(sink->take().size(), 3u);
  size_t held = budget->used();
  drain(*sink);
  EXPECT_EQ(sink->take(), (std::vector<std::string>{proto::render_event("s", raws[6]),
                                                   proto::render_eose("s"),
                                                   proto::render_event("s", live->raw)}));
  EXPECT_TRUE(sink->waiters.empty());
  EXPECT_LT(budget->used(), held) << "sent history is given back";
}

TEST_F(history_test, a_close_while_the_history_waits_drops_it_and_its_bytes) {
  auto sink = std::make_shared<gated_sink>();
  auto conn = open(sink);
  send(conn, R"(["REQ","s",{"kinds":[1]}])");
  std::vector<std::string> raws;
  for (int i = 0; i < 5; ++i)
    raws.push_back(make_event(bob_sk, 1, "h" + std::to_string(i), now - i).raw);
  history_next(raws);
  EXPECT_GT(budget->used(), 0u) << "the history is held";
  send(conn, R"(["CLOSE","s"])");
  // Given back at the CLOSE, not when a drain would have reached it
  // (issue 13, finding 1: a socket that never drains kept it forever).
  EXPECT_EQ(budget->used(), 0u);
  drain(*sink);
  EXPECT_TRUE(sink->take().empty());
  EXPECT_EQ(budget->used(), 0u);
}

TEST_F(history_test, reqs_are_charged_to_the_connection_and_given_back) {
  auto sink = std::make_shared<gated_sink>();
  auto filters = R"({"authors":[")" + std::string(64, 'a') + R"("]})";
  std::vector<proto::filter> parsed{*proto::parse_filter(filters, {})};
  const size_t one = subscription_bytes(parsed);
  auto conn = open(sink, one + one / 2);
  send(conn, "[\"REQ\",\"a\"," + filters + "]");
  history_next({});
  EXPECT_EQ(sink->take(), std::vector<std::string>{proto::render_eose("a")});
  EXPECT_EQ(budget->used(), one);
  send(conn, "[\"REQ\",\"b\"," + filters + "]");
  EXPECT_EQ(sink->take(),
            std::vector<std::string>{proto::render_closed(
              "b", "rate-limited: subscription too large for this connection")});
  // Replacing gives the old one's bytes back first.
  send(conn, "[\"REQ\",\"a\"," + filters + "]");
  history_next({});
  EXPECT_EQ(sink->take(), std::vector<std::string>{proto::render_eose("a")});
  EXPECT_EQ(budget->used(), one);
  send(conn, R"(["CLOSE","a"])");
  EXPECT_EQ(budget->used(), 0u);
  send(conn, "[\"REQ\",\"b\"," + filters + "]");
  history_next({});
  EXPECT_EQ(budget->used(), one);
  // The connection's end gives back all it held.
  caf::anon_send(conn, socket_closed{});
  run();
  EXPECT_EQ(budget->used(), 0u);
}

// Issue 13, finding 1: one slow reader with many large REQs held the whole
// node-wide budget. Its unsent history is now capped per connection.
TEST_F(history_test, unsent_history_is_capped_per_connection) {
  auto sink = std::make_shared<gated_sink>();
  auto one = history_of(5);
  size_t held = 0;
  for (auto& raw : one)
    held += raw.size() + history_frame_overhead;
  auto conn = open(sink, 0, [&](connection_settings& s) { s.max_history_bytes = held + held / 2; });
  send(conn, R"(["REQ","a",{"kinds":[1]}])");
  history_next(one);
  EXPECT_TRUE(sink->take().empty()) << "queued, under the cap";
  send(conn, R"(["REQ","b",{"kinds":[1]}])");
  history_next(history_of(5, "b"));
  EXPECT_EQ(sink->take(), std::vector<std::string>{proto::render_closed(
                            "b", "rate-limited: too much unsent history on this connection")});
  EXPECT_TRUE(refused("history_bytes", 1));
  // Once a has gone out, its bytes are given back and there is room again.
  send(conn, R"(["REQ","c",{"kinds":[1]}])");
  drain(*sink);
  drain(*sink);
  EXPECT_EQ(sink->take().size(), 6u);  // a's five events and its EOSE
  history_next(history_of(5, "c"));
  EXPECT_TRUE(sink->take().empty()) << "c is queued: a's bytes were given back";
  drain(*sink);
  drain(*sink);
  EXPECT_EQ(sink->take().size(), 6u);
}

// Issue 13, finding 1: a closed or replaced delivery behind a stuck one was
// given back only when it reached the front of the queue.
TEST_F(history_test, a_delivery_behind_a_stuck_one_is_given_back_when_closed_or_replaced) {
  auto sink = std::make_shared<gated_sink>();
  auto conn = open(sink);
  send(conn, R"(["REQ","a",{"kinds":[1]}])");
  history_next(history_of(5, "a"));
  const size_t with_a = budget->used();
  send(conn, R"(["REQ","b",{"kinds":[1]}])");
  history_next(history_of(5, "b"));
  send(conn, R"(["REQ","c",{"kinds":[1]}])");
  history_next(history_of(5, "c"));
  EXPECT_TRUE(sink->take().empty());
  send(conn, R"(["CLOSE","c"])");
  send(conn, R"(["REQ","b",{"ids":[")" + std::string(64, 'f') + R"("]}])");  // replaces b
  EXPECT_EQ(budget->used(), with_a + subscription_bytes({*proto::parse_filter(
                                       R"({"ids":[")" + std::string(64, 'f') + R"("]})", {})}))
    << "c's and the old b's histories are given back at once";
  history_next({});  // the new b's (empty) history waits behind a
  drain(*sink);
  drain(*sink);
  auto out = sink->take();
  ASSERT_EQ(out.size(), 7u);  // a's five events and EOSE, the new b's EOSE
  EXPECT_EQ(out.back(), proto::render_eose("b"));
  EXPECT_TRUE(sink->waiters.empty());
}

// Issue 13, finding 1: a client that reads a frame just often enough to
// escape the gateway's write-stall rule held its queued history forever.
TEST_F(history_test, queued_histories_the_socket_takes_no_slice_of_in_time_are_ended) {
  auto sink = std::make_shared<gated_sink>();
  auto conn = open(sink, 0, [](connection_settings& s) { s.history_stall = std::chrono::seconds(60); });
  send(conn, R"(["REQ","live",{"kinds":[7]}])");
  history_next({});
  send(conn, R"(["REQ","a",{"kinds":[1]}])");
  history_next(history_of(7, "a"));
  send(conn, R"(["REQ","b",{"kinds":[1]}])");
  history_next(history_of(2, "b"));
  sink->take();
  sched().advance_time(std::chrono::seconds(30));
  run();
  drain(*sink);  // a slice at 30 s: the clock starts again
  EXPECT_EQ(sink->take().size(), 3u);
  sched().advance_time(std::chrono::seconds(59));
  run();
  EXPECT_TRUE(sink->take().empty()) << "59 s since the last slice";
  sched().advance_time(std::chrono::seconds(1));
  run();
  EXPECT_EQ(sink->take(),
            (std::vector<std::string>{proto::render_closed("a", "rate-limited: history not read in time"),
                                      proto::render_closed("b", "rate-limited: history not read in time")}));
  EXPECT_TRUE(refused("history_stall", 2));
  EXPECT_EQ(budget->used(), subscription_bytes({*proto::parse_filter(R"({"kinds":[7]})", {})}))
    << "only the live subscription is still held";
  // The live subscription stays, and a later history is served as usual.
  drain(*sink);
  EXPECT_TRUE(sink->take().empty());
  send(conn, R"(["REQ","c",{"kinds":[1]}])");
  history_next(history_of(2, "c"));
  EXPECT_EQ(sink->take().size(), 3u);
}

TEST(memory_budget, reserves_up_to_its_limit_and_counts_what_is_released) {
  memory_budget b{100};
  EXPECT_TRUE(b.try_reserve(60));
  EXPECT_FALSE(b.try_reserve(41));
  EXPECT_TRUE(b.try_reserve(40));
  b.release(70);
  EXPECT_EQ(b.used(), 30u);
  EXPECT_EQ(b.take_released(), 70u);
  EXPECT_EQ(b.take_released(), 0u);
  memory_budget unlimited{0};
  EXPECT_TRUE(unlimited.try_reserve(size_t{1} << 40));
}

TEST(subscription_bytes, grows_with_the_values_a_filter_holds) {
  auto f = [](int n) {
    std::string json = R"({"kinds":[)";
    for (int i = 0; i < n; ++i)
      json += (i ? "," : "") + std::to_string(i);
    return std::vector<proto::filter>{*proto::parse_filter(json + "]}", {})};
  };
  EXPECT_LT(subscription_bytes(f(1)), subscription_bytes(f(10)));
  EXPECT_GT(subscription_bytes(f(500)), 500u * 64);
}

}  // namespace

// docs/protocol.md, "History in pages": a client that stops reading costs
// the node one page of its history, not all of it.
TEST_F(history_test, a_paged_history_reads_its_next_page_once_the_socket_has_sent_the_last) {
  auto sink = std::make_shared<gated_sink>();
  auto conn = open(sink);
  send(conn, R"(["REQ","s",{"kinds":[1]}])");
  ASSERT_EQ(reader_log->held_requests.size(), 1u);
  EXPECT_EQ(reader_log->held_requests.front().req.page.rows, 100u);
  EXPECT_FALSE(reader_log->held_requests.front().req.page.started);
  auto raws = history_of(5);
  page_next({raws[0], raws[1]}, true);
  // The first page fits one slice: out at once, without EOSE.
  EXPECT_EQ(sink->take(), (std::vector<std::string>{proto::render_event("s", raws[0]),
                                                   proto::render_event("s", raws[1])}));
  EXPECT_TRUE(reader_log->held_requests.empty())
    << "the next page waits until the socket has sent this one";
  ASSERT_EQ(sink->limits.size(), 1u);
  EXPECT_EQ(sink->limits.back(), connection_settings{}.history_page_drain_bytes);
  drain(*sink);
  ASSERT_EQ(reader_log->held_requests.size(), 1u);
  auto& next = reader_log->held_requests.front().req;
  EXPECT_TRUE(next.page.started);
  EXPECT_EQ(next.page.horizon_id, std::string(64, 'c'));
  EXPECT_EQ(next.page.remaining, (std::vector<uint32_t>{7}));
  EXPECT_EQ(next.page.rows, 200u) << "each page twice the last";
  ASSERT_EQ(next.filters.size(), 1u);
  // An event of the second page that also arrives live goes out once.
  auto again = std::make_shared<const proto::event>(*proto::parse_event(raws[3]));
  caf::anon_send(hub, committed_events{{ingest_item{1, again}}});
  run();
  EXPECT_TRUE(sink->take().empty()) << "live events wait for EOSE";
  size_t before = budget->used();
  page_next({raws[2], raws[3], raws[4]}, false);
  EXPECT_TRUE(sink->take().empty()) << "a page read later goes out as the socket drains";
  size_t held = budget->used();
  EXPECT_GT(held, before + 1000) << "its text is charged while it waits";
  drain(*sink);
  EXPECT_EQ(sink->take(), (std::vector<std::string>{proto::render_event("s", raws[2]),
                                                   proto::render_event("s", raws[3]),
                                                   proto::render_event("s", raws[4]),
                                                   proto::render_eose("s")}));
  EXPECT_LT(budget->used(), before + 1000) << "a page's text is given back once sent";
}

TEST_F(history_test, closing_a_subscription_while_its_next_page_is_read_withdraws_that_read) {
  auto sink = std::make_shared<gated_sink>();
  auto conn = open(sink);
  send(conn, R"(["REQ","s",{"kinds":[1]}])");
  auto raws = history_of(3);
  page_next({raws[0]}, true);
  sink->take();
  drain(*sink);
  ASSERT_EQ(reader_log->held_requests.size(), 1u);
  reader_log->withdrawals.clear();
  send(conn, R"(["CLOSE","s"])");
  ASSERT_EQ(reader_log->withdrawals.size(), 1u) << "the page must not be read for nobody";
  EXPECT_FALSE(reader_log->withdrawals[0].all);
  EXPECT_EQ(reader_log->withdrawals[0].requests.size(), 1u);
  page_next({raws[1], raws[2]}, false);
  EXPECT_TRUE(sink->take().empty()) << "a page read for a closed subscription is dropped";
  EXPECT_TRUE(sink->waiters.empty());
}

TEST_F(history_test, a_client_that_stops_reading_is_never_read_a_second_page_for) {
  auto sink = std::make_shared<gated_sink>();
  auto conn = open(sink);
  send(conn, R"(["REQ","s",{"kinds":[1]}])");
  auto raws = history_of(9);
  // A page larger than a slice is held and goes out as the socket drains.
  page_next({raws.begin(), raws.begin() + 6}, true);
  drain(*sink);
  drain(*sink);
  EXPECT_EQ(sink->take().size(), 6u);
  EXPECT_TRUE(reader_log->held_requests.empty());
  // The socket keeps what it was given: the drain the next page waits for
  // (to at most history_page_drain_bytes) never comes, and no read is made.
  ASSERT_EQ(sink->waiters.size(), 1u);
  EXPECT_EQ(sink->limits.back(), connection_settings{}.history_page_drain_bytes);
  run();
  EXPECT_TRUE(reader_log->held_requests.empty());
}

// Red-team (issue 13, paging): a delivery queued behind one whose next page
// is being read never armed a drain of its own (on_drained returns without
// arming while the front reads a page). When that front ends before its
// page answers (CLOSE, replace, page error, revocation), the one behind it
// is the new front with no drain armed: its history never goes out and it
// never gets EOSE (with history_stall on, it is ended "rate-limited:
// history not read in time" instead, though the client read everything).
TEST_F(history_test, redteam_a_history_behind_a_closed_paged_one_still_reaches_eose) {
  auto sink = std::make_shared<gated_sink>();
  auto conn = open(sink);
  send(conn, R"(["REQ","a",{"kinds":[1]}])");
  auto a = history_of(3, "a");
  page_next({a[0]}, true);  // small first page: out at once, next page waits for a drain
  drain(*sink);             // a's second page is now being read
  ASSERT_EQ(reader_log->held_requests.size(), 1u);
  send(conn, R"(["REQ","b",{"kinds":[1]}])");
  ASSERT_EQ(reader_log->held_requests.size(), 2u);
  // b's (unpaged-sized) history answers first; it queues behind a.
  std::swap(reader_log->held_requests[0], reader_log->held_requests[1]);
  auto b = history_of(2, "b");
  page_next(b, false);
  sink->take();
  // The socket has room: the drain fires while a's page is still read.
  if (!sink->waiters.empty())
    drain(*sink);
  send(conn, R"(["CLOSE","a"])");
  sink->take();
  // b is the front now and must be sent as the socket drains.
  ASSERT_EQ(sink->waiters.size(), 1u) << "nobody waits for the socket to send b's history";
  drain(*sink);
  EXPECT_EQ(sink->take(), (std::vector<std::string>{proto::render_event("b", b[0]),
                                                   proto::render_event("b", b[1]),
                                                   proto::render_eose("b")}));
}

// The same through the stall rule: b is ended as if its client had not
// read, counted as a refusal (paced) of a well-behaved client.
TEST_F(history_test, redteam_a_history_behind_a_replaced_paged_one_is_not_ended_as_stalled) {
  auto sink = std::make_shared<gated_sink>();
  auto conn = open(sink, 0, [](connection_settings& s) { s.history_stall = std::chrono::seconds(60); });
  send(conn, R"(["REQ","a",{"kinds":[1]}])");
  auto a = history_of(3, "a");
  page_next({a[0]}, true);
  drain(*sink);
  send(conn, R"(["REQ","b",{"kinds":[1]}])");
  std::swap(reader_log->held_requests[0], reader_log->held_requests[1]);
  auto b = history_of(2, "b");
  page_next(b, false);
  if (!sink->waiters.empty())
    drain(*sink);
  sink->take();
  send(conn, R"(["REQ","a",{"ids":[")" + std::string(64, 'f') + R"("]}])");  // replaces a
  if (!sink->waiters.empty())
    drain(*sink);  // a fixed node sends b here
  sched().advance_time(std::chrono::seconds(61));
  run();
  auto out = sink->take();
  for (auto& f : out)
    EXPECT_EQ(f.find("history not read in time"), std::string::npos) << f;
  EXPECT_FALSE(refused("history_stall", 1));
}

// Red-team (issue 13, paging + pacing): docs/protocol.md says a subscription
// ended by a revocation is no answer to the client and is not counted. A
// removal seen by a later page's access re-check ends the subscription
// through end_subscription, so it is paced like a refusal the client caused.
struct pacing_sink : gated_sink {
  std::vector<std::chrono::milliseconds> pauses;
  void pause_reading(std::chrono::milliseconds d) override { pauses.push_back(d); }
};

TEST_F(history_test, redteam_a_removal_seen_at_a_later_page_is_not_paced_as_a_refusal) {
  auto sink = std::make_shared<pacing_sink>();
  auto conn = open(sink, 0, [](connection_settings& s) {
    s.refusals.burst = 0.5;  // the first refusal pauses: any pacing shows
    s.refusals.per_second = 1;
  });
  send(conn, R"(["REQ","s",{"kinds":[1]}])");
  page_next({history_of(1)[0]}, true);
  drain(*sink);
  ASSERT_EQ(reader_log->held_requests.size(), 1u);
  sink->take();
  caf::anon_send(reader_raw, caf::atom("reply"),
                 status{ec::restricted, "not a member of this community"});
  run();
  EXPECT_EQ(sink->take(), (std::vector<std::string>{proto::render_closed(
                            "s", "restricted: not a member of this community")}));
  EXPECT_TRUE(sink->pauses.empty()) << "a revocation between pages paused the client's reading";
}
