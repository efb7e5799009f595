// The delivery supervisor as push uses it (docs/push.md, "Delivery"), under
// test_coordinator: wakes handed over already claimed (delivery_ready) go to
// free slots without a claim of their own, a freed slot does not claim,
// answers are held and written as one batch, and a wake that waited too
// long after its revalidation is not sent.

#include "tests/actors/delivery/delivery_fixture.hpp"

namespace waggle::testing {
namespace {

using namespace std::chrono_literals;

const std::string gateway = "http://gateway.example/push";

delivery_job wake(int64_t row) {
  delivery_job job;
  job.community_id = 1;
  job.row_id = row;
  job.claim_id = "claim-" + std::to_string(row);
  job.delivery_id = "request-" + std::to_string(row);
  job.route = "push";
  job.url = gateway;
  job.body = "{}";
  job.attempts = 1;
  return job;
}

class PushDeliveryTest : public actor_test {
 protected:
  std::shared_ptr<fake_queue> queue = std::make_shared<fake_queue>();
  std::shared_ptr<fake_http_client> http = std::make_shared<fake_http_client>();
  node_env env = test_env();
  delivery_supervisor_actor sup;

  void start(uint32_t slots) {
    auto store = spawn(fake_store, queue);
    delivery_settings s;
    s.queue = "push";
    s.slots = slots;
    s.per_route = 0;
    s.claim_when_freed = false;
    s.completion_delay = 50ms;
    s.relay_secret = std::string(63, '0') + "1";
    sup = spawn(delivery_supervisor_actor_impl, store, http, s, env);
    run();
  }
  void ready(std::vector<delivery_job> jobs) {
    caf::anon_send(sup, delivery_ready{std::move(jobs)});
    run();
  }
};

TEST_F(PushDeliveryTest, ReadyWakesAreSentWithoutAClaimAndAnswersAreWrittenTogether) {
  start(2);
  auto claims_at_start = queue->claims.size();  // the start-up catch-up claim
  ready({wake(1), wake(2), wake(3)});
  EXPECT_EQ(http->pending.size(), 2u) << "two slots: two out, one waiting in memory";
  EXPECT_TRUE(http->answer(200));
  run();
  EXPECT_EQ(http->pending.size(), 2u) << "the freed slot took the waiting wake";
  EXPECT_TRUE(http->answer(200));
  EXPECT_TRUE(http->answer(200));
  run();
  EXPECT_EQ(queue->claims.size(), claims_at_start) << "a freed slot does not claim";
  EXPECT_TRUE(queue->completions.empty()) << "answers are held for the completion delay";
  sched().advance_time(50ms);
  run();
  EXPECT_EQ(queue->completion_batches, 1);
  ASSERT_EQ(queue->completions.size(), 3u);
  for (const auto& c : queue->completions)
    EXPECT_EQ(c.verdict, delivery_verdict::delivered);
}

TEST_F(PushDeliveryTest, AWakeThatWaitedPastItsRevalidationIsNotSent) {
  start(1);
  ready({wake(1), wake(2)});
  ASSERT_EQ(http->pending.size(), 1u);
  sched().advance_time(2s);  // the second waits in memory past ready_max_wait (1 s)
  run();
  EXPECT_TRUE(http->answer(200));
  run();
  EXPECT_TRUE(http->pending.empty()) << "its claim's lease runs out; a claim revalidates it";
}

// Found by tests/e2e/cluster_claims_test.cpp: a poll that came while every
// slot was out (first attempts handed over) returned without arming the next
// one, and a freed slot does not claim, so the node never claimed its retries
// again (402 wakes stayed pending, due for a minute, on both nodes).
TEST_F(PushDeliveryTest, APollWhileEverySlotIsOutStillLeadsToALaterClaim) {
  start(1);
  auto claims_at_start = queue->claims.size();
  ready({wake(1)});
  ASSERT_EQ(http->pending.size(), 1u);
  sched().advance_time(5s);  // the poll comes with the only slot out
  run();
  EXPECT_TRUE(http->answer(200));
  run();
  queue->add(gateway);  // a retry, due
  sched().advance_time(5s);
  run();
  EXPECT_GT(queue->claims.size(), claims_at_start) << "no poll claimed after the busy one";
  EXPECT_EQ(http->pending.size(), 1u) << "the retry is sent";
}

TEST_F(PushDeliveryTest, AGoneAnswerIsItsOwnVerdict) {
  start(1);
  ready({wake(1)});
  EXPECT_TRUE(http->answer(410));
  run();
  sched().advance_time(50ms);
  run();
  ASSERT_EQ(queue->completions.size(), 1u);
  EXPECT_EQ(queue->completions[0].verdict, delivery_verdict::gone);
}

// Found by tests/faults/fault_check endpoints: a claim left with one free
// slot, a wake handed over took that slot before the claim came back, and
// the claimed retry was dropped ("claimed more rows than free slots"), to be
// sent only when its claim's lease ran out, 30 s later. It now waits in
// memory for the next free slot. Red before: nothing was sent once the slot
// freed.
TEST_F(PushDeliveryTest, ARowClaimedWhileAHandedOverWakeTookTheSlotIsSentWhenItFrees) {
  start(1);
  queue->add(gateway);   // a retry, due
  sched().advance_time(5s);  // the poll: its tick reaches the supervisor
  ASSERT_TRUE(sched().prioritize(sup));
  sched().run_once();  // the tick: the claim leaves for the store, one slot free
  caf::anon_send(sup, delivery_ready{{wake(9)}});
  ASSERT_TRUE(sched().prioritize(sup));
  sched().run_once();  // the handed-over wake takes the slot before the claim's answer
  run();               // the claim comes back with the retry and no free slot
  ASSERT_EQ(http->pending.size(), 1u) << "the handed-over wake, alone";
  EXPECT_TRUE(http->answer(200));
  run();
  EXPECT_EQ(http->pending.size(), 1u) << "the claimed retry went out on the freed slot";
}

}  // namespace
}  // namespace waggle::testing
