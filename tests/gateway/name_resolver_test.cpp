// gateway::name_resolver (docs/delivery.md, "Names"): a name whose lookup
// hangs delays only the requests to that name. The lookups are a stand-in
// that blocks on a gate, so nothing here depends on a real nameserver.

#include "gateway/name_resolver.hpp"

#include <atomic>
#include <condition_variable>
#include <functional>
#include <future>
#include <map>
#include <mutex>
#include <thread>

#include <boost/asio/io_context.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <gtest/gtest.h>

namespace waggle::gateway {
namespace {

using namespace std::chrono_literals;
using tcp = boost::asio::ip::tcp;

// Lookups of "slow.test" wait until opened; every other name answers at once.
struct stand_in {
  std::mutex mutex;
  std::condition_variable cv;
  bool open = false;
  std::map<std::string, int> calls;

  name_resolver::lookup_fn fn() {
    return [this](const std::string& host, uint16_t port) {
      std::unique_lock lock(mutex);
      ++calls[host];
      if (host == "slow.test")
        cv.wait(lock, [this] { return open; });
      if (host == "missing.test")
        return std::pair<std::string, name_resolver::endpoints>{"Name or service not known", {}};
      return std::pair<std::string, name_resolver::endpoints>{
        "", {tcp::endpoint{boost::asio::ip::make_address("192.0.2.1"), port}}};
    };
  }
  void release() {
    std::lock_guard lock(mutex);
    open = true;
    cv.notify_all();
  }
  int calls_of(const std::string& host) {
    std::lock_guard lock(mutex);
    return calls[host];
  }
};

class NameResolverTest : public ::testing::Test {
 protected:
  void SetUp() override {
    io_thread = std::thread([this] { io.run(); });
  }
  void TearDown() override {
    lookups.release();  // no lookup thread is left waiting on the gate
    work.reset();
    io_thread.join();
  }
  void drain_io() {
    std::promise<void> drained;
    boost::asio::post(io, [&drained] { drained.set_value(); });
    drained.get_future().wait();
  }
  static bool within(std::chrono::milliseconds limit, const std::function<bool()>& cond) {
    auto until = std::chrono::steady_clock::now() + limit;
    while (!cond() && std::chrono::steady_clock::now() < until)
      std::this_thread::yield();
    return cond();
  }
  std::future<std::string> resolve(name_resolver& r, const std::string& host) {
    auto answer = std::make_shared<std::promise<std::string>>();
    auto f = answer->get_future();
    r.resolve(host, 80, io.get_executor(), [answer](std::string error, name_resolver::endpoints found) {
      answer->set_value(error.empty() ? found.at(0).address().to_string() : "error: " + error);
    });
    return f;
  }
  name_resolver::settings with(size_t threads) {
    name_resolver::settings s;
    s.max_lookups = threads;
    s.lookup = lookups.fn();
    return s;
  }

  stand_in lookups;
  boost::asio::io_context io;
  boost::asio::executor_work_guard<boost::asio::io_context::executor_type> work =
    boost::asio::make_work_guard(io);
  std::thread io_thread;
};

// Issue 34 ("DNS on one thread"): with Asio's resolver every lookup of the
// client waited behind the one before it. With one lookup thread here (what
// Asio had) this test is red: fast.test waits for slow.test.
TEST_F(NameResolverTest, ASlowNameDoesNotDelayAnother) {
  name_resolver r(with(8));
  auto slow = resolve(r, "slow.test");
  auto fast = resolve(r, "fast.test");
  ASSERT_EQ(fast.wait_for(10s), std::future_status::ready) << "fast.test waited for slow.test";
  EXPECT_EQ(fast.get(), "192.0.2.1");
  EXPECT_EQ(slow.wait_for(0s), std::future_status::timeout);
  lookups.release();
  ASSERT_EQ(slow.wait_for(10s), std::future_status::ready);
  EXPECT_EQ(slow.get(), "192.0.2.1");
}

// Requests to one name share its lookup, and its answer is kept: a burst of
// wakes to a listener whose DNS is slow takes one thread, not one each.
TEST_F(NameResolverTest, OneLookupPerNameAndAnswersAreKept) {
  name_resolver r(with(8));
  std::vector<std::future<std::string>> waiting;
  for (int i = 0; i < 20; ++i)
    waiting.push_back(resolve(r, "slow.test"));
  auto other = resolve(r, "fast.test");
  ASSERT_EQ(other.wait_for(10s), std::future_status::ready);
  lookups.release();
  for (auto& w : waiting) {
    ASSERT_EQ(w.wait_for(10s), std::future_status::ready);
    EXPECT_EQ(w.get(), "192.0.2.1");
  }
  EXPECT_EQ(lookups.calls_of("slow.test"), 1);
  EXPECT_EQ(resolve(r, "slow.test").get(), "192.0.2.1");
  EXPECT_EQ(lookups.calls_of("slow.test"), 1) << "a kept answer was looked up again";
}

// A failure is answered to every waiter and not kept: the next request asks again.
TEST_F(NameResolverTest, AFailureIsAnsweredAndNotKept) {
  name_resolver r(with(2));
  EXPECT_EQ(resolve(r, "missing.test").get(), "error: Name or service not known");
  EXPECT_EQ(resolve(r, "missing.test").get(), "error: Name or service not known");
  EXPECT_EQ(lookups.calls_of("missing.test"), 2);
}

// Stopped with a lookup running: its handler is dropped (the client fails
// its own requests), and the lookup thread, which ends later, posts nothing.
TEST_F(NameResolverTest, StoppingDropsWaitersAndALateAnswerPostsNothing) {
  std::atomic<bool> called{false};
  name_resolver r(with(2));
  r.resolve("slow.test", 80, io.get_executor(),
            [&called](std::string, name_resolver::endpoints) { called = true; });
  ASSERT_TRUE(within(10s, [&] { return lookups.calls_of("slow.test") == 1; }));
  r.stop();
  lookups.release();
  ASSERT_TRUE(within(10s, [&] { return r.running() == 0; })) << "the lookup thread did not end";
  drain_io();
  EXPECT_FALSE(called.load());
}

}  // namespace
}  // namespace waggle::gateway
