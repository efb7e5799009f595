#pragma once

// Node-wide counters, gauges and histograms, rendered in Prometheus text
// format by GET /metrics. Lock-free atomics: the one piece of state that
// actors and io threads share, because a metrics actor would put a mailbox
// hop on every hot path for numbers nobody needs exactly in order.

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <tuple>
#include <iosfwd>
#include <vector>

#include "actors/support/bus_metrics.hpp"
#include "messages/outcome.hpp"

namespace waggle::db {
class replica_pool;
}

namespace waggle {

class histogram {
 public:
  // Upper bounds in seconds (Prometheus `le`), ascending.
  explicit histogram(std::vector<double> bounds);
  void observe(double value);
  std::string render(const std::string& name, const std::string& help) const;

 private:
  std::vector<double> bounds_;
  std::unique_ptr<std::atomic<uint64_t>[]> buckets_;  // bounds_.size() + 1 (+Inf)
  std::atomic<uint64_t> count_{0};
  std::atomic<uint64_t> sum_micros_{0};
};

class metrics {
 public:
  metrics();

  std::atomic<int64_t> connections{0};
  std::atomic<int64_t> http_submits_in_flight{0};     // POST /events being answered
  std::atomic<uint64_t> http_submits_refused{0};      // 503: over a cap of in-flight POSTs
  std::atomic<int64_t> live_subscriptions{0};
  std::atomic<int64_t> roster_actors{0};  // the group actor's, stopped when idle
  std::atomic<uint64_t> rosters_published{0};  // roster publications this node committed
  std::atomic<uint64_t> events_accepted{0};
  std::atomic<uint64_t> events_duplicate{0};
  std::atomic<uint64_t> ingest_batches{0};
  std::atomic<uint64_t> expired_events_reaped{0};  // NIP-40, by the expiration reaper
  std::atomic<int64_t> reads_queued{0};      // reads waiting in the reader pool for a session
  std::atomic<int64_t> readers_busy{0};      // reader sessions running a read
  std::atomic<uint64_t> history_pages{0};  // pages of REQ histories read after their first
  std::atomic<uint64_t> reads_withdrawn{0};  // queued reads dropped because their caller gave up
  histogram ingest_batch_size;      // events per committed batch
  histogram commit_latency;         // seconds from BEGIN to COMMIT returning
  histogram ack_latency;            // seconds from frame received to OK sent
  // Delivery (docs/delivery.md), for the operator listeners' queue.
  std::atomic<int64_t> deliveries_in_flight{0};  // slots with a request out
  std::atomic<int64_t> listener_up{0};           // 1 while the LISTEN probe arrives
  std::atomic<int64_t> delivery_queue_age_ms{0}; // the oldest row of the latest claim
  // Push (docs/push.md).
  std::atomic<int64_t> push_match_queue_age_ms{0};  // the oldest job of the latest batch
  // The bus driver's (docs/bus.md).
  bus_metrics bus;

  // events rejected, by reason label ("invalid", "restricted", ...).
  void count_rejected(const std::string& reason);
  // One answer to a submitted event, under its metric (messages/outcome.hpp).
  void count(const answer& a);
  // A request, frame or connection turned away by a limit or a check that is
  // not about an event's content (waggle_refusals_total{reason}). `reason` is
  // a short fixed label ("too_many_connections", "reads_in_flight", ...),
  // never client text: labels are a closed set (docs/operations.md lists them).
  // Also logged ("refused", component "refusals"): at most one line per
  // reason a second, carrying the count since the reason's last line.
  void count_refused(std::string_view reason);

  // One finished delivery attempt (waggle_deliveries_total{queue,outcome}):
  // outcome delivered, retry, failed (terminal), dropped (attempts or age
  // exhausted), fenced (another claim owns the row now).
  void count_delivery(std::string_view queue, std::string_view outcome, uint64_t n = 1);
  // Match jobs by result (matched, unmatched, gone, error, context_error,
  // exhausted) and wakes by outcome (enqueued, duplicate, inactive_lease).
  void count_push_jobs(std::string_view result, uint64_t n);
  void count_push_wakes(std::string_view outcome, uint64_t n);

  // Replica routing (docs/replicas.md): one count per routed read
  // (waggle_route_decisions_total{path,decision,reason}); the ring's newest
  // proof (steady clock ns, 0 = none) for the heartbeat-age gauge; the pools
  // whose gauges and counters are rendered with the rest.
  std::atomic<int64_t> heartbeat_newest_ns{0};
  std::atomic<uint64_t> heartbeat_epoch_rotations{0};
  void count_route(std::string_view path, bool replica, std::string_view reason);
  void add_replica_pool(std::shared_ptr<const db::replica_pool> pool);

  std::string render() const;

 private:
  void render_replicas(std::ostream& out) const;  // metrics_replicas.cpp
  std::map<std::tuple<std::string, bool, std::string>, uint64_t, std::less<>> routes_;
  std::vector<std::shared_ptr<const db::replica_pool>> pools_;
  mutable std::mutex mtx_;
  std::map<std::string, uint64_t> rejected_;
  std::map<std::string, uint64_t, std::less<>> refused_;
  // The log's view of refusals: one line per reason a second at most, with
  // how many there were since its last line (a flood must not flood the log).
  struct refusal_log {
    uint64_t unlogged = 0;
    std::chrono::steady_clock::time_point last{};
  };
  std::map<std::string, refusal_log, std::less<>> refusal_log_;
  std::map<std::pair<std::string, std::string>, uint64_t> deliveries_;
  std::map<std::string, uint64_t, std::less<>> push_jobs_, push_wakes_;
};

}  // namespace waggle
