// The delivery supervisor and its slots under test_coordinator
// (docs/delivery.md): the in-flight cap, no head-of-line blocking, what each
// answer means for its row, and the idle poll's cadence.

#include <algorithm>

#include "tests/actors/delivery/delivery_fixture.hpp"

namespace waggle::testing {
namespace {

using namespace std::chrono_literals;

const std::string stalled = "http://stalled.example/wake";
const std::string healthy = "http://healthy.example/wake";

class DeliverySupervisorTest : public actor_test {
 protected:
  std::shared_ptr<fake_queue> queue = std::make_shared<fake_queue>();
  std::shared_ptr<fake_http_client> http = std::make_shared<fake_http_client>();
  node_env env = test_env();

  delivery_supervisor_actor start(uint32_t slots = 10, uint32_t per_route = 0) {
    auto store = spawn(fake_store, queue);
    delivery_settings s;
    s.slots = slots;
    s.per_route = per_route;
    s.relay_secret = std::string(63, '0') + "1";
    auto sup = spawn(delivery_supervisor_actor_impl, store, http, s, env);
    run();
    return sup;
  }
  // Runs every message; fails if more than `cap` exchanges were ever out at once.
  void run_capped(size_t cap) {
    while (sched().try_run_once())
      ASSERT_LE(http->pending.size(), cap);
  }
};

// Must-show 3: 50 rows, the first nine to an endpoint that never answers.
// Never more than 10 requests out, and every row to the healthy endpoint is
// delivered while the nine still hang: a freed slot claims at once.
TEST_F(DeliverySupervisorTest, StalledEndpointHoldsOnlyItsOwnSlots) {
  queue->add(stalled, 9);
  queue->add(healthy, 41);
  auto sup = start();
  EXPECT_EQ(http->pending.size(), 10u);  // claimed at start: what was committed before
  size_t delivered = 0;
  while (http->answer(200, healthy)) {
    ++delivered;
    run_capped(10);
    ASSERT_LE(http->pending.size(), 10u);
  }
  EXPECT_EQ(delivered, 41u);
  EXPECT_EQ(http->pending_for(stalled), 9u);
  EXPECT_TRUE(queue->due.empty());
  size_t done = 0;
  for (const auto& c : queue->completions)
    done += c.verdict == delivery_verdict::delivered;
  EXPECT_EQ(done, 41u);
  EXPECT_EQ(env.stats->deliveries_in_flight.load(), 9);
}

// Red-team D1: a listener that never answers, with more rows due than there
// are slots, holds at most its per-route share; the other listener's rows
// all go out meanwhile (without the cap the stalled one took all 10 slots
// and nothing else was ever sent).
TEST_F(DeliverySupervisorTest, AListenerThatNeverAnswersHoldsAtMostItsShare) {
  queue->add(stalled, 30);
  queue->add(healthy, 20);
  auto sup = start(10, 4);
  EXPECT_EQ(http->pending_for(stalled), 4u);
  size_t delivered = 0;
  while (http->answer(200, healthy)) {
    ++delivered;
    run_capped(10);
    ASSERT_LE(http->pending_for(stalled), 4u);
  }
  EXPECT_EQ(delivered, 20u);
  EXPECT_EQ(http->pending_for(stalled), 4u);
  EXPECT_EQ(queue->due.size(), 26u) << "the stalled listener's other rows wait their turn";
  // Each claim named the routes with a request out: the stalled four.
  EXPECT_EQ(std::count(queue->busy_seen.back().begin(), queue->busy_seen.back().end(), stalled), 4);
  // A stalled answer frees its slot, and its route gets the next one.
  ASSERT_TRUE(http->answer(0, stalled));
  run_capped(10);
  EXPECT_EQ(http->pending_for(stalled), 4u);
  EXPECT_EQ(queue->due.size(), 25u);
}

TEST_F(DeliverySupervisorTest, EachRequestIsSignedAndNamesItsDelivery) {
  queue->add(healthy);
  start();
  ASSERT_EQ(http->pending.size(), 1u);
  const auto& req = http->pending.front().request;
  EXPECT_EQ(req.url, healthy);
  EXPECT_EQ(req.timeout, 5000ms);
  std::map<std::string, std::string> headers(req.headers.begin(), req.headers.end());
  EXPECT_EQ(headers["X-Waggle-Delivery-Id"], "d-1");
  EXPECT_EQ(headers["Authorization"].rfind("Nostr ", 0), 0u);
}

TEST_F(DeliverySupervisorTest, AnswersDecideEachRow) {
  queue->add(healthy, 6);
  start(6);
  ASSERT_EQ(http->pending.size(), 6u);
  for (uint16_t status : {200, 204, 500, 429, 0, 404})
    http->answer(status);
  run();
  ASSERT_EQ(queue->completions.size(), 6u);
  auto v = [&](size_t i) { return queue->completions[i].verdict; };
  EXPECT_EQ(v(0), delivery_verdict::delivered);
  EXPECT_EQ(v(1), delivery_verdict::delivered);
  EXPECT_EQ(v(2), delivery_verdict::retry);
  EXPECT_EQ(v(3), delivery_verdict::retry);
  EXPECT_EQ(v(4), delivery_verdict::retry);  // no answer at all (timeout)
  EXPECT_EQ(v(5), delivery_verdict::terminal);
  EXPECT_EQ(queue->completions[2].retry_after_ms, 1000);  // attempt 1: 2^0 s
}

TEST_F(DeliverySupervisorTest, RetriesBackOffExponentially) {
  EXPECT_EQ(delivery_backoff(1).count(), 1000);
  EXPECT_EQ(delivery_backoff(2).count(), 2000);
  EXPECT_EQ(delivery_backoff(8).count(), 128000);
  EXPECT_EQ(delivery_backoff(9).count(), 128000);  // capped at 2^7 s
  EXPECT_EQ(classify_delivery({302, ""}), delivery_verdict::terminal);  // never followed
  EXPECT_EQ(classify_delivery({408, ""}), delivery_verdict::retry);
}

// Red-team D2: the lease outlasts the longest request and its completion, so
// a row is never claimed again while its first request may still succeed.
TEST_F(DeliverySupervisorTest, TheLeaseOutlastsTheRequestTimeout) {
  EXPECT_EQ(delivery_lease(5000ms).count(), 30);  // the floor
  EXPECT_EQ(delivery_lease(60000ms).count(), 130);
  for (int64_t ms : {1, 999, 5000, 14000, 20001, 45000, 60000})
    EXPECT_GE(std::chrono::milliseconds(delivery_lease(std::chrono::milliseconds(ms))).count(),
              2 * ms + 10000 - 1000)
      << ms;
}

// With notifications arriving, the idle poll backs off 250 ms -> 2 s; while
// the listener is down it stays at 250 ms.
TEST_F(DeliverySupervisorTest, IdlePollBacksOffOnlyWhileNotificationsArrive) {
  auto sup = start();
  caf::anon_send(sup, listener_health{true});
  run();
  auto claims_after = [&](caf::timespan t) {
    auto before = queue->claims.size();
    sched().advance_time(t);
    run();
    return queue->claims.size() - before;
  };
  // The ticks armed so far: 250 ms (start) and the health change keeps it.
  EXPECT_EQ(claims_after(250ms), 1u);
  EXPECT_EQ(claims_after(499ms), 0u);
  EXPECT_EQ(claims_after(1ms), 1u);      // 500 ms
  EXPECT_EQ(claims_after(1000ms), 1u);   // 1 s
  EXPECT_EQ(claims_after(2000ms), 1u);   // 2 s, the ceiling
  EXPECT_EQ(claims_after(2000ms), 1u);
  caf::anon_send(sup, listener_health{false});
  run();
  EXPECT_EQ(claims_after(250ms), 1u);
  EXPECT_EQ(claims_after(250ms), 1u);
}

// A scheduled retry is claimed when it is due, not at the next idle poll.
TEST_F(DeliverySupervisorTest, ScheduledRetryIsClaimedWhenDue) {
  auto sup = start();
  caf::anon_send(sup, listener_health{true});
  run();
  sched().advance_time(2s);  // idle: the poll is at its 2 s ceiling by now
  run();
  sched().advance_time(2s);
  run();
  queue->next_due_ms = 300;  // the store says a retry is due in 300 ms
  caf::anon_send(sup, delivery_wake{false});
  run();
  queue->add(healthy);
  sched().advance_time(300ms);
  run();
  EXPECT_EQ(http->pending.size(), 1u);
}

TEST_F(DeliverySupervisorTest, WakeWhileClaimingClaimsAgain) {
  auto sup = start(4);
  queue->add(healthy, 2);
  caf::anon_send(sup, delivery_wake{false});
  caf::anon_send(sup, delivery_wake{false});
  run();
  EXPECT_EQ(http->pending.size(), 2u);
  queue->add(healthy, 5);
  caf::anon_send(sup, delivery_wake{false});
  run();
  EXPECT_EQ(http->pending.size(), 4u);  // the cap
}

}  // namespace
}  // namespace waggle::testing
