// The fanout sweep's instrument: its knee, its options, its receivers (spread
// over threads, counting each delivery once, matched by event id) and its
// report. A sweep is only as honest as the receiving side it runs on.

#include <gtest/gtest.h>

#include <latch>
#include <mutex>
#include <set>
#include <thread>

#include <boost/asio/post.hpp>

#include "bench/load/client.hpp"
#include "bench/load/receivers.hpp"
#include "bench/load/report.hpp"
#include "bench/load/sweep_run.hpp"

using namespace waggle::bench;

namespace {

sweep_step_result step_of(size_t subscribers, double p99, double achieved, double offered) {
  sweep_step_result s;
  s.subscribers = s.listening = subscribers;
  s.delivery_ms.count = 100;
  s.delivery_ms.p99 = p99;
  s.achieved_per_s = achieved;
  s.offered_per_s = offered;
  return s;
}

std::vector<prepared_event> some_events(size_t n) {
  auto key = random_keypair();
  return sign_all(n, 1, [&](size_t i, const keypair*& signer) {
    signer = &key;
    waggle::proto::event ev;
    ev.kind = 9;
    ev.created_at = 1'760'000'000;
    ev.content = filler(20, i);
    return ev;
  });
}

bool rejected(std::vector<std::string> args) {
  return std::holds_alternative<std::string>(parse_load_options(std::move(args)));
}

}  // namespace

TEST(SweepKnee, FirstStepPastTheLatencyOrThroughputLine) {
  std::string why;
  std::vector<sweep_step_result> steps{step_of(10, 5, 1000, 1000), step_of(100, 19.9, 9100, 10000),
                                       step_of(1000, 25, 100000, 100000),
                                       step_of(5000, 900, 20000, 500000)};
  auto knee = find_knee(steps, 20, 0.9, why);
  ASSERT_TRUE(knee);
  EXPECT_EQ(*knee, 2u);  // p99 25 > 20; 91 % of offered at 100 is not below 90 %
  EXPECT_NE(why.find("1000 subscribers: delivery p99 25.0 ms"), std::string::npos) << why;

  // Throughput alone: p99 fine, but 89 % of what was offered.
  steps[1].achieved_per_s = 8900;
  knee = find_knee(steps, 20, 0.9, why);
  ASSERT_TRUE(knee);
  EXPECT_EQ(*knee, 1u);
  EXPECT_NE(why.find("8900 < 90 % of 10000"), std::string::npos) << why;

  // Nothing delivered at all is past any line, whatever the (empty) percentiles say.
  std::vector<sweep_step_result> silent{step_of(10, 0, 0, 1000)};
  silent[0].delivery_ms.count = 0;
  EXPECT_EQ(find_knee(silent, 20, 0.9, why), std::optional<size_t>{0});

  std::vector<sweep_step_result> fine{step_of(10, 5, 1000, 1000), step_of(100, 6, 9950, 10000)};
  EXPECT_FALSE(find_knee(fine, 20, 0.9, why));
  EXPECT_TRUE(why.empty());
}

TEST(SweepOptions, DefaultsAndRefusals) {
  auto o = std::get<load_options>(parse_load_options({"--workload", "fanout", "--sweep", "10,100,5000"}));
  EXPECT_EQ(o.sweep, (std::vector<size_t>{10, 100, 5000}));
  EXPECT_EQ(o.rate, 100);
  EXPECT_EQ(o.step_seconds, 10);
  EXPECT_EQ(o.drain_wait, 120);
  EXPECT_EQ(o.knee_p99_ms, 20);
  EXPECT_EQ(o.knee_share, 0.9);
  EXPECT_EQ(o.receiver_threads, 0u);
  auto p = std::get<load_options>(parse_load_options(
    {"--workload", "fanout", "--sweep", "5", "--rate", "50", "--step-seconds", "2",
     "--receiver-threads", "4", "--knee-p99-ms", "50", "--knee-share", "0.8"}));
  EXPECT_EQ(p.rate, 50);
  EXPECT_EQ(p.step_seconds, 2);
  EXPECT_EQ(p.receiver_threads, 4u);
  EXPECT_EQ(p.knee_p99_ms, 50);
  EXPECT_EQ(p.knee_share, 0.8);
  EXPECT_EQ(receiver_threads(4), 4u);
  EXPECT_GE(receiver_threads(0), 1u);

  EXPECT_TRUE(rejected({"--workload", "chat", "--sweep", "10"}));
  EXPECT_TRUE(rejected({"--workload", "fanout", "--sweep", "10", "--subscribers", "5"}));
  EXPECT_TRUE(rejected({"--workload", "fanout", "--sweep", "10,0"}));
  EXPECT_TRUE(rejected({"--workload", "fanout", "--sweep", "10,10"}));
  EXPECT_TRUE(rejected({"--workload", "fanout", "--sweep", "10", "--knee-share", "1.5"}));
  EXPECT_TRUE(rejected({"--workload", "fanout", "--sweep", "10", "--drain-wait", "-1"}));
  EXPECT_TRUE(rejected({"--workload", "fanout"}));  // neither --subscribers nor --sweep
}

TEST(ReceiverPool, SpreadsSocketsRoundRobinOverThreadsOfTheirOwn) {
  receiver_pool pool{3};
  ASSERT_EQ(pool.size(), 3u);
  std::vector<boost::asio::io_context*> got;
  for (int i = 0; i < 6; ++i)
    got.push_back(&pool.next());
  EXPECT_EQ(std::set<boost::asio::io_context*>(got.begin(), got.end()).size(), 3u);
  for (int i = 0; i < 3; ++i)
    EXPECT_EQ(got[i], got[i + 3]);
  // Each context runs on a thread of its own, none of them this one.
  std::mutex m;
  std::set<std::thread::id> threads;
  std::latch done{3};
  for (int i = 0; i < 3; ++i)
    boost::asio::post(*got[i], [&] {
      std::lock_guard lock{m};
      threads.insert(std::this_thread::get_id());
      done.count_down();
    });
  done.wait();
  EXPECT_EQ(threads.size(), 3u);
  EXPECT_FALSE(threads.count(std::this_thread::get_id()));
  // Their CPU is counted: one lane spins for 20 ms of its own CPU time.
  auto before = pool.cpu_seconds();
  std::latch spun{1};
  boost::asio::post(*got[0], [&] {
    auto start = std::clock();
    volatile double x = 0;
    while (static_cast<double>(std::clock() - start) / CLOCKS_PER_SEC < 0.02)
      x = x + 1;
    spun.count_down();
  });
  spun.wait();
  EXPECT_GE(pool.cpu_seconds() - before, 0.015);
  pool.stop();
  pool.stop();  // idempotent
}

TEST(SweepSubscriber, CountsEachPublishedEventOnceByIdAndStopsWhenFrozen) {
  auto events = some_events(4);
  publish_clock clock{events};
  auto t0 = now_ns();
  for (size_t k = 0; k < events.size(); ++k)
    clock.mark_sent(k, t0);
  boost::asio::io_context ioc;
  progress_counters progress;
  auto client = std::make_shared<nostr_client>(ioc, random_keypair(), "ws://x");
  auto sub = std::make_shared<subscriber>(client, "{}", &clock, progress);
  sub->on_event(events[2].id);
  sub->on_event(events[0].id);
  sub->on_event(events[2].id);             // a duplicate
  sub->on_event(std::string(64, 'a'));     // not this run's
  EXPECT_EQ(sub->delivered(), 2u);
  EXPECT_EQ(sub->duplicates, 1u);
  EXPECT_EQ(sub->foreign, 1u);
  EXPECT_TRUE(sub->saw(0));
  EXPECT_TRUE(sub->saw(2));
  EXPECT_FALSE(sub->saw(1));
  EXPECT_EQ(sub->delivery_ms.size(), 2u);
  EXPECT_GE(sub->last_ns, t0);
  EXPECT_GE(sub->received_at(0), t0);
  EXPECT_EQ(sub->received_at(1), 0);
  sub->freeze();
  sub->on_event(events[1].id);
  EXPECT_EQ(sub->delivered(), 2u);
  EXPECT_FALSE(sub->saw(1));
}

TEST(SweepTally, EveryAcceptedEventOwedToEveryListeningSubscriber) {
  auto events = some_events(3);
  publish_clock clock{events};
  auto t0 = now_ns();
  for (size_t k = 0; k < 3; ++k)
    clock.mark_sent(k, t0);
  clock.mark_accepted(0, t0 + 1'000'000);
  clock.mark_accepted(1, t0 + 2'000'000);  // event 2 was never acked
  boost::asio::io_context ioc;
  progress_counters progress;
  auto sub = [&] {
    return std::make_shared<subscriber>(
      std::make_shared<nostr_client>(ioc, random_keypair(), "ws://x"), "{}", &clock, progress);
  };
  auto a = sub(), b = sub();
  for (auto& e : events)
    a->on_event(e.id);
  b->on_event(events[1].id);
  sweep_step_result step;
  tally_deliveries(clock, {a.get(), b.get()}, step);
  EXPECT_EQ(step.expected, 4u);
  EXPECT_EQ(step.delivered, 3u);  // a: 0 and 1 (2 owed nobody); b: 1
  EXPECT_EQ(step.missed, 1u);     // b never got 0
  EXPECT_EQ(step.after_ok_ms.count, 3u);
  // OK to receipt, per delivery: a's 0 and 1, b's 1.
  auto ms = [&](const std::shared_ptr<subscriber>& s, size_t k) {
    return static_cast<double>(s->received_at(k) - clock.accepted_at(k)) / 1e6;
  };
  EXPECT_NEAR(step.after_ok_ms.mean, (ms(a, 0) + ms(a, 1) + ms(b, 1)) / 3, 1e-6);
}

TEST(SweepReceiving, EventIdFoundWithoutAFullParseWhateverTheKeyOrder) {
  // The relay may write `content` (or tags) before `id`; text in them that
  // looks like an id key is escaped and must not be taken for it.
  std::string id(64, 'c');
  std::string frame = R"(["EVENT","live",{"content":"say \"id\":\")" + std::string(64, 'f') +
                      R"(\" ok","tags":[["id","x"]],"id":")" + id + R"(","kind":9}])";
  relay_message m;
  ASSERT_TRUE(parse_relay_message(frame, m));
  EXPECT_EQ(m.sub_or_id, "live");
  EXPECT_EQ(m.event_id, id);
}

TEST(SweepReport, JsonKeysStepsBySubscribersAndNamesTheKnee) {
  sweep_result r;
  r.options = std::get<load_options>(parse_load_options({"--workload", "fanout", "--sweep", "10,5000"}));
  r.receiver_threads = 2;
  r.steps = {step_of(10, 5, 1000, 1000), step_of(5000, 900, 20000, 500000)};
  r.steps[1].missed = 7;
  r.knee = find_knee(r.steps, 20, 0.9, r.knee_reason);
  auto s = summarize_runs({to_json(r)}, "");
  ASSERT_TRUE(s.error.empty()) << s.error;
  EXPECT_EQ(s.medians.at("knee_subscribers"), 5000);
  EXPECT_EQ(s.medians.at("steps/5000/delivery/missed"), 7);
  EXPECT_NEAR(s.medians.at("steps/5000/delivery/achieved_share"), 0.04, 1e-9);
  EXPECT_EQ(s.medians.at("steps/10/delivery/latency_ms/p99"), 5);
  auto md = to_markdown(r);
  EXPECT_NE(md.find("| 5000 |"), std::string::npos) << md;
  EXPECT_NE(md.find("Knee (delivery p99 > 20 ms"), std::string::npos) << md;
  EXPECT_NE(md.find("5000 subscribers: delivery p99 900.0 ms"), std::string::npos) << md;
  EXPECT_FALSE(r.clean());  // a missed delivery
  r.steps[1].missed = 0;
  EXPECT_TRUE(r.clean());
}
