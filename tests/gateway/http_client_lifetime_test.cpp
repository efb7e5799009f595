// The outbound HTTP client's lifetime: the destructor fails what is in
// flight once; a client dropped inside a callback (its own or another
// client's) neither deadlocks nor leaves a thread running while the process
// exits. The exit cases run in a child process (death tests, `threadsafe`
// style), with `alarm` turning a hang into a failure.

#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <future>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include <unistd.h>

#include "tests/gateway/http_test_server.hpp"

namespace {

using namespace waggle::gateway;
using namespace waggle::gateway::test_support;
using namespace std::chrono_literals;

TEST(HttpClient, DestroyingFailsExchangesInFlightOnce) {
  test_server srv;
  auto client = make_http_client();
  constexpr int n = 10;
  std::mutex m;
  std::vector<http_result> results;
  for (int i = 0; i < n; ++i)
    client->post(post_to(srv.url("/hang"), 30s), [&](http_result r) {
      std::lock_guard lock(m);
      results.push_back(std::move(r));
    });
  // Every exchange is past its write, waiting for an answer that never comes.
  ASSERT_TRUE(srv.wait_for_requests(n, 10s));
  auto start = std::chrono::steady_clock::now();
  client.reset();  // joins: every `done` has run by now
  EXPECT_LT(std::chrono::steady_clock::now() - start, 5s);
  std::lock_guard lock(m);
  ASSERT_EQ(results.size(), std::size_t(n));
  for (auto& r : results) {
    EXPECT_EQ(r.status, 0);
    EXPECT_EQ(r.error, "stopped");
  }
}

TEST(HttpClient, DroppingTheClientFromItsOwnCallbackDoesNotDeadlock) {
  test_server srv;
  auto holder = std::make_shared<std::shared_ptr<http_client>>(make_http_client());
  auto got = std::make_shared<std::promise<uint16_t>>();
  auto fut = got->get_future();
  auto* raw = holder->get();
  raw->post(post_to(srv.url("/ok")), [holder, got](http_result r) {
    holder->reset();  // the last reference: destroyed on its own io thread
    got->set_value(r.status);
  });
  holder.reset();
  ASSERT_EQ(fut.wait_for(10s), std::future_status::ready);
  EXPECT_EQ(fut.get(), 200);
}

// A client dropped from its own callback leaves its thread running after the
// drop; the process must not end under it (a detached thread still freeing
// its SSL context while exit() tore OpenSSL down crashed ~1 run in 150). In a
// child process: an exchange still in flight when the client is dropped gets
// "stopped", and its callback takes 200 ms; exit() must wait for it.
TEST(HttpClientDeathTest, ExitWaitsForTheThreadOfAClientDroppedFromItsOwnCallback) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  auto child = [] {
    {
      test_server srv;
      auto holder = std::make_shared<std::shared_ptr<http_client>>(make_http_client());
      auto* raw = holder->get();
      raw->post(post_to(srv.url("/hang"), 30s), [](http_result r) {
        std::this_thread::sleep_for(200ms);
        std::fprintf(stderr, "slow callback ended: %s\n", r.error.c_str());
      });
      if (!srv.wait_for_requests(1, 10s))
        std::_Exit(3);
      auto dropped = std::make_shared<std::promise<void>>();
      auto fut = dropped->get_future();
      raw->post(post_to(srv.url("/ok")), [holder, dropped](http_result) {
        holder->reset();
        dropped->set_value();
      });
      holder.reset();
      if (fut.wait_for(10s) != std::future_status::ready)
        std::_Exit(4);
    }
    std::exit(0);
  };
  EXPECT_EXIT(child(), ::testing::ExitedWithCode(0), "slow callback ended: ");
}

// exit() from inside the callback that dropped the client: the exit runs on
// the very thread the reaper holds, which must not wait for itself (a join
// there aborted with "Resource deadlock avoided").
TEST(HttpClientDeathTest, ExitFromTheCallbackThatDroppedTheClient) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  auto child = [] {
    alarm(10);  // a hang fails the test instead of the run
    test_server srv;
    auto holder = std::make_shared<std::shared_ptr<http_client>>(make_http_client());
    auto* raw = holder->get();
    raw->post(post_to(srv.url("/ok")), [holder](http_result) {
      holder->reset();
      std::exit(0);
    });
    holder.reset();
    std::this_thread::sleep_for(10s);
    std::_Exit(5);
  };
  EXPECT_EXIT(child(), ::testing::ExitedWithCode(0), "");
}

// Two clients whose callbacks each drop the other: A's callback destroys B,
// whose "stopped" callback destroys A. Neither destructor may wait for the
// other's thread, or each waits on the other for ever.
TEST(HttpClientDeathTest, TwoClientsDroppingEachOtherFromTheirCallbacksBothEnd) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  auto child = [] {
    alarm(10);
    {
      test_server srv;
      auto a = std::make_shared<std::shared_ptr<http_client>>(make_http_client());
      auto b = std::make_shared<std::shared_ptr<http_client>>(make_http_client());
      auto* raw_a = a->get();
      auto* raw_b = b->get();
      auto a_done = std::make_shared<std::promise<void>>();
      auto b_done = std::make_shared<std::promise<void>>();
      auto a_fut = a_done->get_future();
      auto b_fut = b_done->get_future();
      raw_b->post(post_to(srv.url("/hang"), 30s), [a, b_done](http_result r) {
        a->reset();  // on B's thread: the last reference to A
        if (r.error == "stopped")
          b_done->set_value();
      });
      if (!srv.wait_for_requests(1, 5s))
        std::_Exit(3);
      raw_a->post(post_to(srv.url("/ok")), [b, a_done](http_result) {
        b->reset();  // on A's thread: the last reference to B
        a_done->set_value();
      });
      a.reset();
      b.reset();
      if (a_fut.wait_for(5s) != std::future_status::ready ||
          b_fut.wait_for(5s) != std::future_status::ready)
        std::_Exit(4);
    }
    std::exit(0);
  };
  EXPECT_EXIT(child(), ::testing::ExitedWithCode(0), "");
}

}  // namespace
