#include "bench/load/receivers.hpp"

#include <pthread.h>
#include <time.h>

namespace waggle::bench {

size_t receiver_threads(size_t requested) {
  return requested ? requested : std::max(1u, std::thread::hardware_concurrency());
}

receiver_pool::receiver_pool(size_t threads) {
  for (size_t i = 0; i < std::max<size_t>(1, threads); ++i) {
    auto l = std::make_unique<lane>();
    // Concurrency hint 1: each context is run by one thread (others still post to it).
    l->ioc = std::make_unique<boost::asio::io_context>(1);
    l->guard = std::make_unique<
      boost::asio::executor_work_guard<boost::asio::io_context::executor_type>>(
      l->ioc->get_executor());
    l->thread = std::thread([ioc = l->ioc.get()] { ioc->run(); });
    lanes_.push_back(std::move(l));
  }
}

receiver_pool::~receiver_pool() { stop(); }

boost::asio::io_context& receiver_pool::next() { return *lanes_[next_++ % lanes_.size()]->ioc; }

double receiver_pool::cpu_seconds() const {
  double total = 0;
  for (auto& l : lanes_) {
    if (!l->thread.joinable())
      continue;
    clockid_t cid;
    timespec ts{};
    auto handle = const_cast<std::thread&>(l->thread).native_handle();
    if (pthread_getcpuclockid(handle, &cid) == 0 && clock_gettime(cid, &ts) == 0)
      total += static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) / 1e9;
  }
  return total;
}

void receiver_pool::stop() {
  for (auto& l : lanes_) {
    l->guard.reset();
    l->ioc->stop();
  }
  for (auto& l : lanes_)
    if (l->thread.joinable())
      l->thread.join();
}

}  // namespace waggle::bench
