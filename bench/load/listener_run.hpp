#pragma once

// The listener side of a run (docs/benchmarks.md, "Operator listeners"):
// receivers up and targets registered before the clock starts; after the
// load, each accepted mention matched to its listener's receipt, and the
// latency from the OK the publisher read to the receipt.

#include <memory>
#include <string>
#include <vector>

#include "bench/load/events.hpp"
#include "bench/load/listener_receiver.hpp"
#include "bench/load/options.hpp"
#include "bench/load/setup.hpp"
#include "bench/load/stats.hpp"

namespace waggle::bench {

struct listener_result {
  size_t listeners = 0;
  size_t stalled = 0;
  size_t expected = 0;    // (accepted mention, healthy listener) pairs
  size_t delivered = 0;   // of those, received
  size_t missed = 0;
  size_t repeated = 0;    // a healthy listener got an event it already had (a retry)
  size_t stalled_requests = 0;  // requests the stalled receivers read, retries included
  size_t foreign = 0;     // requests that named no mention of this run
  double span_s = 0;      // first OK to the last healthy receipt
  double per_s = 0;       // delivered / span_s
  latency_summary latency_ms;  // OK -> receipt, healthy listeners
};

class listener_side {
 public:
  // Starts one receiver per port (the last `stalled_listeners` stalled).
  // Throws when a port cannot be bound.
  explicit listener_side(const load_options& o);
  ~listener_side();

  size_t size() const { return receivers_.size(); }
  bool healthy(size_t l) const { return !receivers_[l]->stalled(); }
  uint16_t port(size_t l) const { return receivers_[l]->port(); }
  // The targets the listener workloads mention: one fresh key per listener.
  const std::vector<std::string>& targets() const { return targets_; }

  // Listener workloads: each listener registers its own target. Chat:
  // member j is registered with listener j mod N. "" or what failed.
  std::string register_all(const relay_endpoint& relay, const load_options& o,
                           const std::vector<keypair>& members);

  // Requests read so far by the healthy receivers (retries included).
  size_t healthy_requests() const;
  void stop();

  // listener_of[k]: the listener that event k mentions a target of (-1: none).
  listener_result collect(const publish_clock& clock, const std::vector<int>& listener_of);

 private:
  std::vector<std::unique_ptr<listener_receiver>> receivers_;
  std::vector<std::string> targets_;
};

}  // namespace waggle::bench
