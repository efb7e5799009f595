#pragma once

// The bus driver's counters (docs/bus.md, "Metrics"), one set per node and
// rendered with the node's metrics under the label driver="...". Drops and
// refusals carry a closed set of reasons (bus_errc names, and the drivers'
// own: "undecodable", "no_subscriber", "lagged", "slow_consumer").

#include <atomic>
#include <cstdint>
#include <iosfwd>
#include <map>
#include <mutex>
#include <string>
#include <string_view>

#include <caf/fwd.hpp>

namespace waggle {

class bus_metrics {
 public:
  std::string driver = "inproc";
  std::atomic<uint64_t> published{0};    // messages the driver took
  std::atomic<uint64_t> delivered{0};    // messages put in a local subscriber's mailbox
  std::atomic<uint64_t> lagged{0};       // bus_lagged notices sent to subscribers
  std::atomic<uint64_t> notifies{0};     // PostgreSQL: NOTIFYs sent by the doorbell
  std::atomic<uint64_t> fetch_pages{0};  // PostgreSQL: pages fetched from the message table
  std::atomic<int64_t> lag_ms{0};        // PostgreSQL: age of the newest fetched message's publish
  std::atomic<int64_t> peers{0};         // CAF: peers connected; NATS: 1 while connected
  // The node's bus probe (actors/bus/bus_probe.hpp): its own messages round
  // the bus, and the pings it answered for others.
  std::atomic<uint64_t> probes_sent{0};
  std::atomic<uint64_t> probes_returned{0};
  std::atomic<uint64_t> probes_lost{0};      // not back by their deadline
  std::atomic<int64_t> probe_rtt_us{0};      // the last returned probe's round trip
  std::atomic<uint64_t> probe_rtt_us_sum{0}; // all returned probes' round trips
  std::atomic<uint64_t> pings_answered{0};
  // Cluster fanout (docs/scaling.md): live nodes in the registry, this one
  // included, as the cluster tail last read it (every 10 s); 0 alone.
  std::atomic<int64_t> cluster_nodes{0};

  // A publish, subscribe or request refused (its bus_errc's name).
  void count_refused(const caf::error& err);
  // A message dropped on its way (reason: a short fixed label).
  void count_dropped(std::string_view reason, uint64_t n = 1);
  uint64_t dropped(std::string_view reason) const;

  void render(std::ostream& out) const;

 private:
  mutable std::mutex mtx_;
  std::map<std::string, uint64_t, std::less<>> refused_, dropped_;
};

}  // namespace waggle
