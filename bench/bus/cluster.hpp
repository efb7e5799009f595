#pragma once

// waggle-bus-bench (docs/benchmarks.md, "Bus"): the bus nodes of one run, in
// this process, each on an actor system of its own (as two processes would
// be) with its own connections or middleman port; the subscribers that time
// what they receive; the publisher that paces what node A publishes.
//
// Every probe's payload carries its sequence number and the steady-clock
// time it was (due to be) published; the receiving subscriber, in the same
// process, takes the difference: publish-to-receive, one clock.

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <caf/all.hpp>

#include "actors/support/metrics.hpp"
#include "messages/interfaces.hpp"

namespace waggle::busbench {

int64_t now_ns();

// What one subscriber received on one subject.
struct sink {
  mutable std::mutex mtx;
  std::vector<int64_t> latency_ns;  // publish (scheduled) to receipt, per message
  uint64_t received = 0;
  uint64_t out_of_order = 0;  // a sequence number below one seen before
  uint64_t lagged_notices = 0;
  uint64_t lagged_missed = 0;
  int64_t last_seq = -1;
  int64_t last_receipt_ns = 0;

  uint64_t count() const {
    std::lock_guard g{mtx};
    return received;
  }
};

// Latency figures of one sink (ms; nearest rank over every message).
struct latency_summary {
  uint64_t received = 0;
  double p50 = 0, p90 = 0, p99 = 0, max = 0;
  uint64_t lagged_notices = 0, lagged_missed = 0, out_of_order = 0;
};
latency_summary summarize(const sink& s);

// The publisher's counts (node A's publishes).
struct pub_counters {
  std::atomic<uint64_t> sent{0};
  std::atomic<uint64_t> acked{0};
  std::atomic<uint64_t> errors{0};
  std::atomic<uint64_t> flood_acked{0};
  std::mutex mtx;
  std::string last_error;
  uint64_t in_flight() const { return sent.load() - acked.load() - errors.load(); }
};

// "<seq hex 16><t_ns hex 16>" padded with 'x' to `size` bytes (at least 32).
std::string make_payload(uint64_t seq, int64_t t_ns, size_t size);

struct bus_node {
  std::string name;
  std::shared_ptr<metrics> stats = std::make_shared<metrics>();
  std::unique_ptr<caf::actor_system_config> cfg;
  std::unique_ptr<caf::actor_system> sys;
  bus_actor bus;
};

class cluster {
 public:
  // driver: inproc (one node: B is A), postgres or caf (two nodes on
  // `database_url`), nats (two nodes, each its own connection to the server
  // at `nats_url`). Throws when a node cannot start or (caf) the nodes do
  // not see each other within 20 s.
  cluster(const std::string& driver, const std::string& database_url, const std::string& nats_url,
          size_t payload_bytes);
  ~cluster();

  size_t nodes() const { return b_ ? 2 : 1; }
  bus_node& a() { return *a_; }
  bus_node& b() { return b_ ? *b_ : *a_; }

  // A timing subscriber of `subject` on `node`; waits for the subscribe's answer.
  std::shared_ptr<sink> subscribe(bus_node& node, const std::string& subject);

  // Node A publishes n messages on `subject`, numbered from first_seq, the
  // i-th stamped t_first_ns + i * interval_ns (its due time).
  void publish(const std::string& subject, uint64_t first_seq, uint32_t n, int64_t t_first_ns,
               double interval_ns);
  // Node A publishes on `subject` as fast as the driver acknowledges, `window` in flight.
  void flood(const std::string& subject, uint32_t window);
  void stop_flood();

  pub_counters& counters() { return *counters_; }

 private:
  std::unique_ptr<bus_node> start(const std::string& driver, const std::string& name,
                                  const std::string& database_url, const std::string& nats_url);

  std::unique_ptr<bus_node> a_, b_;
  std::shared_ptr<pub_counters> counters_ = std::make_shared<pub_counters>();
  caf::actor publisher_;
  std::vector<caf::actor> subscribers_;
};

}  // namespace waggle::busbench
