// The history queue's decisions (actors/connection/history_queue.hpp): the
// byte caps, the slices a drain sends and in what order, paging, dropping,
// and the stall rule, on a made-up clock and budget. No actor.

#include "actors/connection/history_queue.hpp"

#include <gtest/gtest.h>

using namespace waggle;
using namespace std::chrono_literals;

namespace {

// A queue with small slices: 3 frames or 100 bytes.
history_limits small_limits() {
  history_limits l;
  l.slice_frames = 3;
  l.slice_bytes = 100;
  l.max_bytes = 0;
  l.stall = 60s;
  l.page_drain_bytes = 4096;
  l.max_page_rows = 50;
  return l;
}

std::vector<std::string> frames(const std::string& prefix, int n, size_t size = 10) {
  std::vector<std::string> out;
  for (int i = 0; i < n; ++i) {
    auto f = prefix + std::to_string(i);
    f.resize(size, '.');
    out.push_back(f);
  }
  return out;
}

// Queues `raws` for `sub_id` the way the actor does: held, then pushed.
void queue(history_queue& q, const std::string& sub_id, std::vector<std::string> raws,
           std::optional<history_request> next_page = std::nullopt) {
  auto held = history_queue::held_bytes_of(raws);
  ASSERT_EQ(q.hold(held), history_hold::held);
  q.push({sub_id, 1, std::move(raws), 0, held, std::move(next_page), false, 0});
}

// What a drain sent: "sub:frame" per frame, "EOSE sub" per history finished.
struct drained {
  std::vector<std::string> out;
  history_next next = history_next::nothing;
};

drained drain(history_queue& q, size_t room_frames = SIZE_MAX, size_t room_bytes = SIZE_MAX) {
  drained d;
  d.next = q.on_drained(
    room_frames, room_bytes,
    [&](const std::string& sub, const std::string& raw) {
      d.out.push_back(sub + ":" + raw.substr(0, raw.find('.')));
    },
    [&](const std::string& sub) { d.out.push_back("EOSE " + sub); });
  return d;
}

const steady_time t0 = steady_time{} + 1000s;

}  // namespace

TEST(HistoryQueue, OnlyASmallHistoryWithNothingBeforeItGoesAtOnce) {
  history_queue q{small_limits()};
  EXPECT_TRUE(q.sends_at_once(frames("a", 3)));
  EXPECT_FALSE(q.sends_at_once(frames("a", 4)));        // past the slice's frames
  EXPECT_FALSE(q.sends_at_once(frames("a", 2, 60)));    // past the slice's bytes
  EXPECT_TRUE(q.sends_at_once(frames("a", 2, 50)));     // exactly the slice's bytes
  queue(q, "a", frames("a", 5));
  EXPECT_FALSE(q.sends_at_once(frames("b", 1)));  // would overtake the queued one
}

TEST(HistoryQueue, TheConnectionCapIsCheckedBeforeTheNodeBudget) {
  auto limits = small_limits();
  limits.max_bytes = 1000;
  auto budget = std::make_shared<memory_budget>(10000);
  history_queue q{limits, budget};
  EXPECT_EQ(q.hold(600), history_hold::held);
  EXPECT_EQ(q.hold(401), history_hold::over_connection_cap);
  // Refused by the connection's cap: the node's budget was not touched.
  EXPECT_EQ(budget->used(), 600u);
  EXPECT_EQ(q.hold(400), history_hold::held);
  EXPECT_EQ(q.bytes(), 1000u);
  EXPECT_EQ(budget->used(), 1000u);
}

TEST(HistoryQueue, TheNodeBudgetRefusesWhatTheConnectionCapWouldTake) {
  auto limits = small_limits();
  limits.max_bytes = 0;  // no cap of its own
  auto budget = std::make_shared<memory_budget>(700);
  history_queue q{limits, budget};
  EXPECT_EQ(q.hold(600), history_hold::held);
  EXPECT_EQ(q.hold(200), history_hold::over_node_budget);
  EXPECT_EQ(q.bytes(), 600u);  // a refused hold holds nothing
  EXPECT_EQ(budget->used(), 600u);
  q.release_all();
  EXPECT_EQ(budget->used(), 0u);
  EXPECT_EQ(q.bytes(), 0u);
}

TEST(HistoryQueue, ADrainSendsOneSliceInQueueOrderAndFinishesEachHistoryAfterItsFrames) {
  auto budget = std::make_shared<memory_budget>(0);
  history_queue q{small_limits(), budget};
  queue(q, "a", frames("a", 5));
  queue(q, "b", frames("b", 2));
  auto first = drain(q);
  EXPECT_EQ(first.out, (std::vector<std::string>{"a:a0", "a:a1", "a:a2"}));
  EXPECT_EQ(first.next, history_next::wait_drain);
  // Nothing is given back before a delivery is sent whole.
  EXPECT_EQ(q.bytes(), history_queue::held_bytes_of(frames("a", 5))
                         + history_queue::held_bytes_of(frames("b", 2)));
  auto second = drain(q);
  EXPECT_EQ(second.out, (std::vector<std::string>{"a:a3", "a:a4", "EOSE a", "b:b0"}));
  EXPECT_EQ(second.next, history_next::wait_drain);  // b's second frame is past the slice
  auto third = drain(q);
  EXPECT_EQ(third.out, (std::vector<std::string>{"b:b1", "EOSE b"}));
  EXPECT_EQ(third.next, history_next::nothing);
  EXPECT_TRUE(q.empty());
  EXPECT_EQ(q.bytes(), 0u);
  EXPECT_EQ(budget->used(), 0u);
}

TEST(HistoryQueue, TheRoomLeftBoundsTheSliceButOneFrameAlwaysGoes) {
  history_queue q{small_limits()};
  queue(q, "a", frames("a", 5, 40));
  // No room at all: one frame still goes (the session's own rules judge progress).
  EXPECT_EQ(drain(q, 0, 0).out, (std::vector<std::string>{"a:a0"}));
  // Room for two frames.
  EXPECT_EQ(drain(q, 2).out, (std::vector<std::string>{"a:a1", "a:a2"}));
  // Bytes: a3 and a4 (80 bytes) fit in the slice's 100, b0 would pass it.
  queue(q, "b", frames("b", 3, 40));
  auto d = drain(q);
  EXPECT_EQ(d.out, (std::vector<std::string>{"a:a3", "a:a4", "EOSE a"}));
  EXPECT_EQ(d.next, history_next::wait_drain);
  EXPECT_EQ(drain(q).out, (std::vector<std::string>{"b:b0", "b:b1"}));
}

TEST(HistoryQueue, APagedHistoryWaitsForAnEmptySocketThenReadsItsNextPage) {
  history_queue q{small_limits()};
  queue(q, "a", frames("a", 2), history_request{});
  queue(q, "b", frames("b", 1));
  auto d = drain(q);
  EXPECT_EQ(d.out, (std::vector<std::string>{"a:a0", "a:a1"}));
  EXPECT_EQ(d.next, history_next::wait_empty);
  EXPECT_EQ(q.bytes(), history_queue::held_bytes_of(frames("b", 1)));  // a's page is given back
  EXPECT_EQ(q.drain_after_drop(), small_limits().page_drain_bytes);
  EXPECT_EQ(drain(q).next, history_next::read_page);
  q.page_requested(7);
  EXPECT_TRUE(q.reading_pages());
  EXPECT_FALSE(q.drain_after_drop());  // its page's answer arms the next drain
  // While the page is read, nothing behind it overtakes it.
  auto waiting = drain(q);
  EXPECT_TRUE(waiting.out.empty());
  EXPECT_EQ(waiting.next, history_next::nothing);
  EXPECT_FALSE(q.page_answered("b"));
  EXPECT_TRUE(q.page_answered("a"));
  EXPECT_FALSE(q.page_answered("a"));  // answered once
  EXPECT_FALSE(q.reading_pages());
  auto page = frames("p", 1);
  auto held = history_queue::held_bytes_of(page);
  ASSERT_EQ(q.hold(held), history_hold::held);
  q.refill_front(std::move(page), held, std::nullopt);
  EXPECT_EQ(drain(q).out, (std::vector<std::string>{"a:p0", "EOSE a", "b:b0", "EOSE b"}));
  EXPECT_EQ(q.bytes(), 0u);
}

TEST(HistoryQueue, NextPagesDoubleUpToTheLargestLimit) {
  history_queue q{small_limits()};  // at most 50 rows
  history_request asked;
  asked.page.rows = 20;
  history_reply reply;
  EXPECT_FALSE(q.next_page_of(asked, reply));  // no more
  reply.more = true;
  reply.next.rows = 999;  // the reader's horizon; the size is ours
  auto next = q.next_page_of(asked, reply);
  ASSERT_TRUE(next);
  EXPECT_EQ(next->page.rows, 40u);
  next = q.next_page_of(*next, reply);
  ASSERT_TRUE(next);
  EXPECT_EQ(next->page.rows, 50u);
}

TEST(HistoryQueue, DroppingGivesBytesBackAtOnceWhereverTheDeliveryStands) {
  auto budget = std::make_shared<memory_budget>(0);
  history_queue q{small_limits(), budget};
  queue(q, "a", frames("a", 5));
  queue(q, "b", frames("b", 5), history_request{});
  queue(q, "c", frames("c", 5));
  const auto before = q.bytes();
  EXPECT_TRUE(q.drop("b").empty());  // behind a, not at the front: given back all the same
  EXPECT_EQ(q.bytes(), before - history_queue::held_bytes_of(frames("b", 5)));
  EXPECT_EQ(budget->used(), q.bytes());
  EXPECT_EQ(q.size(), 2u);
  EXPECT_EQ(q.drain_after_drop(), SIZE_MAX);
  EXPECT_TRUE(q.drop("nobody").empty());
  EXPECT_EQ(q.size(), 2u);
  q.drop("a");
  q.drop("c");
  EXPECT_TRUE(q.empty());
  EXPECT_FALSE(q.drain_after_drop());
  EXPECT_EQ(budget->used(), 0u);
}

TEST(HistoryQueue, DroppingADeliveryWhosePageIsReadReturnsItsRequestToWithdraw) {
  history_queue q{small_limits()};
  queue(q, "a", frames("a", 1), history_request{});
  drain(q);
  ASSERT_EQ(drain(q).next, history_next::read_page);
  q.page_requested(42);
  EXPECT_EQ(q.drop("a"), (std::vector<uint64_t>{42}));
  EXPECT_FALSE(q.reading_pages());
}

TEST(HistoryQueue, ProgressArmsOneStallCheckAtATime) {
  history_queue q{small_limits()};
  EXPECT_TRUE(q.stall_rule());
  EXPECT_TRUE(q.progressed(t0));
  EXPECT_FALSE(q.progressed(t0 + 10s));  // one on its way already
  q.stall_check_arrived();
  EXPECT_TRUE(q.progressed(t0 + 20s));
}

TEST(HistoryQueue, AQueueThatMovedIsCheckedAgainForTheRestOfTheStallTime) {
  history_queue q{small_limits()};
  queue(q, "a", frames("a", 5));
  q.progressed(t0);
  q.progressed(t0 + 10s);  // a slice was taken
  q.stall_check_arrived();
  auto early = q.check_stall(t0 + 60s);
  ASSERT_TRUE(early.recheck_in);
  EXPECT_EQ(*early.recheck_in, 10s);
  EXPECT_TRUE(early.stalled.empty());
  EXPECT_FALSE(q.progressed(t0 + 61s));  // the re-check is on its way
}

TEST(HistoryQueue, AStalledQueueEndsEveryQueuedHistory) {
  history_queue q{small_limits()};
  queue(q, "a", frames("a", 5));
  queue(q, "b", frames("b", 5));
  q.progressed(t0);
  q.stall_check_arrived();
  auto verdict = q.check_stall(t0 + 60s);
  EXPECT_FALSE(verdict.recheck_in);
  EXPECT_EQ(verdict.stalled, (std::vector<std::string>{"a", "b"}));
}

TEST(HistoryQueue, NoStallTimeNoStallRule) {
  auto limits = small_limits();
  limits.stall = 0s;
  history_queue q{limits};
  EXPECT_FALSE(q.stall_rule());
}
