#pragma once

// What each connection of a run does once authenticated. Every role lives on
// its client's strand; the coordinator reads its results only after the run
// (all io threads joined), and the shared progress counters are atomics.

#include <atomic>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include <boost/asio/steady_timer.hpp>

#include "bench/load/client.hpp"
#include "bench/load/events.hpp"

namespace waggle::bench {

struct progress_counters {
  std::atomic<size_t> sent{0};
  std::atomic<size_t> answered{0};
  std::atomic<size_t> accepted{0};
  std::atomic<size_t> rejected{0};
  std::atomic<size_t> subscribed{0};  // subscribers whose REQ reached EOSE
  std::atomic<size_t> refused{0};     // subscriptions the relay CLOSED
  std::atomic<size_t> dropped{0};     // connections lost after they were authenticated
};

// The outcome of one event (or REQ), by NIP-01 prefix.
struct outcome_counts {
  size_t sent = 0;
  size_t accepted = 0;
  size_t duplicate = 0;
  size_t rejected = 0;
  std::map<std::string, size_t> rejected_by_reason;  // "invalid", "restricted", ...
  void merge(const outcome_counts& o);
};

// How a publisher paces itself: a window of events in flight (closed loop),
// or a fixed rate with latencies measured from each event's scheduled time
// (open loop, so a stalled relay cannot hide its stall by slowing the tool).
struct pacing {
  size_t in_flight = 1;
  double rate = 0;        // events/s of this connection; 0 = closed loop
  double phase = 0;       // open loop: offset of the first event, in periods
  std::vector<int64_t> at_ns;  // open loop by schedule: event k goes at t0 + at_ns[k]
  bool open_loop() const { return rate > 0 || !at_ns.empty(); }
};

class publisher : public std::enable_shared_from_this<publisher> {
 public:
  publisher(std::shared_ptr<nostr_client> client, std::span<const prepared_event> events,
            size_t first_index, pacing pace, progress_counters& progress, publish_clock* clock);

  // Runs from t0 (steady ns) until `deadline` or the events run out.
  void start(int64_t t0, int64_t deadline);
  void on_ok(std::string_view id, bool accepted, std::string_view message);

  outcome_counts counts;
  std::vector<double> ack_ms;
  int64_t last_answer_ns = 0;
  bool ran_out = false;  // closed loop: every pre-signed event went before the deadline

 private:
  void send(size_t k, int64_t started);
  void tick();

  std::shared_ptr<nostr_client> client_;
  std::span<const prepared_event> events_;
  size_t first_index_;
  pacing pace_;
  progress_counters& progress_;
  publish_clock* clock_;
  std::unique_ptr<boost::asio::steady_timer> timer_;
  struct in_flight_event {
    int64_t started;  // start of its latency
    size_t index;     // in events_
  };
  std::unordered_map<std::string_view, in_flight_event> pending_;  // by id
  size_t next_ = 0;
  size_t limit_ = 0;
  int64_t t0_ = 0;
  int64_t deadline_ = 0;
};

// A live subscriber: one REQ, then counts every event it receives and how long
// after its publication it arrived. Receiving is the tool's hot path (up to
// hundreds of thousands of deliveries a second): a hash lookup of the id, a
// bit, a sample into reserved space, and a counter on this object's own cache
// line (a counter shared by every subscriber would bounce between the
// receiver threads on each delivery).
class subscriber : public std::enable_shared_from_this<subscriber> {
 public:
  subscriber(std::shared_ptr<nostr_client> client, std::string filter_json,
             const publish_clock* clock, progress_counters& progress);
  void subscribe();  // sends the REQ; ready() once EOSE came
  void on_eose();
  void on_event(std::string_view id);
  void on_closed(std::string_view message);
  // On its strand: later events are ignored, so the figures can be read.
  void freeze() { frozen_ = true; }
  // Distinct events of this run received so far; any thread may read it.
  size_t delivered() const { return delivered_.load(std::memory_order_relaxed); }

  size_t distinct = 0;
  size_t duplicates = 0;
  size_t foreign = 0;  // events this run did not publish
  int64_t last_ns = 0;  // the latest first receipt (steady ns)
  std::vector<double> delivery_ms;
  std::string refused;
  bool listening() const { return ready_ && refused.empty(); }
  bool saw(size_t index) const { return received_ns_[index] != 0; }
  // When event `index` first arrived (steady ns), 0 if it has not.
  int64_t received_at(size_t index) const { return received_ns_[index]; }

 private:
  std::shared_ptr<nostr_client> client_;
  std::string filter_json_;
  const publish_clock* clock_;
  progress_counters& progress_;
  std::vector<int64_t> received_ns_;  // by event index
  bool ready_ = false;
  bool frozen_ = false;
  alignas(64) std::atomic<size_t> delivered_{0};
};

// History queries in a closed loop: REQ, wait for EOSE, CLOSE, next.
class querier : public std::enable_shared_from_this<querier> {
 public:
  querier(std::shared_ptr<nostr_client> client, std::vector<std::string> filters,
          size_t in_flight, progress_counters& progress);
  void start(int64_t deadline);
  void on_event() { ++events; }
  void on_eose(std::string_view sub);
  void on_closed(std::string_view sub, std::string_view message);

  outcome_counts counts;
  size_t events = 0;
  std::vector<double> latency_ms;
  int64_t last_answer_ns = 0;

 private:
  void send_next();

  std::shared_ptr<nostr_client> client_;
  std::vector<std::string> filters_;
  size_t in_flight_;
  progress_counters& progress_;
  std::unordered_map<std::string, int64_t> pending_;
  size_t sequence_ = 0;
  int64_t deadline_ = 0;
  bool stopped_ = false;
};

}  // namespace waggle::bench
