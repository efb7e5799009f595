#pragma once

// The tool's receiving side: live subscribers spread round-robin over N io
// contexts, one thread each. Receivers share no reactor, queue or lock with
// each other or with the publishers (which keep the main io context), so a
// step's delivery figures are the relay's, not the tool's: with N threads the
// receivers can use N cores, and cpu_seconds() says how much of them they did.
//
// Checking that the receivers are not the bottleneck: (1) each sweep step
// reports "receivers busy", their CPU over (threads x the delivery span); far
// below 100 % means they kept up and waited on the relay. (2) Run the same
// step with --receiver-threads 1, 2 and 4: if the receivers limited it,
// deliveries/s would rise and latency fall with threads; if the figures move
// only within the machine's noise, the relay (or the shared cores) set them.
// On a machine whose cores the relay shares, more threads cost more CPU per
// delivery (fewer frames per wake-up), so the default of one per core is a
// ceiling, not a free lunch.

#include <cstddef>
#include <memory>
#include <thread>
#include <vector>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>

namespace waggle::bench {

class receiver_pool {
 public:
  explicit receiver_pool(size_t threads);
  ~receiver_pool();
  receiver_pool(const receiver_pool&) = delete;
  receiver_pool& operator=(const receiver_pool&) = delete;

  // The io context of the next receiver, round-robin (callers: one thread).
  boost::asio::io_context& next();
  boost::asio::io_context& at(size_t i) { return *lanes_[i % lanes_.size()]->ioc; }
  size_t size() const { return lanes_.size(); }

  // CPU seconds the receiver threads have used so far (all of them).
  double cpu_seconds() const;
  // Joins the threads; pending handlers are dropped. Idempotent.
  void stop();

 private:
  struct lane {
    std::unique_ptr<boost::asio::io_context> ioc;
    std::unique_ptr<boost::asio::executor_work_guard<boost::asio::io_context::executor_type>> guard;
    std::thread thread;
  };
  std::vector<std::unique_ptr<lane>> lanes_;
  size_t next_ = 0;
};

// `requested`, or the number of cores when it is 0.
size_t receiver_threads(size_t requested);

}  // namespace waggle::bench
