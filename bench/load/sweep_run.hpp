#pragma once

// The fanout sweep (issue 16; docs/benchmarks.md, "Fanout"): one publisher at
// a fixed rate on one channel, and a step per subscriber count (e.g. 10, 100,
// 1,000, 5,000 live subscribers), each step on a fresh channel with fresh
// subscribers, so no step inherits another's backlog or stored events. Per
// step: delivery latency (the publisher's send -> the subscriber's receipt,
// by event id), the publisher's ack latency, deliveries per second achieved
// against offered, missed and duplicate deliveries, how long set-up took and
// how busy the tool's receiver threads were. The knee is the first step
// whose delivery p99 exceeds a threshold or whose deliveries/s fall below a
// share of those offered.

#include <optional>
#include <string>
#include <vector>

#include "bench/load/options.hpp"
#include "bench/load/roles.hpp"
#include "bench/load/stats.hpp"

namespace waggle::bench {

struct sweep_step_result {
  size_t subscribers = 0;  // asked for
  size_t listening = 0;    // reached EOSE and were not refused
  double rate = 0;         // events/s offered
  double seconds = 0;      // the publishing window
  double setup_s = 0;      // connect, AUTH and REQ to EOSE of every subscriber
  outcome_counts outcomes;
  size_t unanswered = 0;
  latency_summary ack_ms;       // scheduled send -> OK (open loop)
  size_t expected = 0;          // accepted events x listening subscribers
  size_t delivered = 0;         // of those, received (each once)
  size_t missed = 0;
  size_t duplicates = 0;
  size_t foreign = 0;           // events no publisher of this step sent
  size_t dropped = 0;           // subscribers lost after they were listening
  latency_summary delivery_ms;  // send -> receipt
  // The publisher's reading of the OK -> receipt: the fanout's own share of
  // the delivery latency, without the write path's (negative when the event
  // beat its OK to the tool).
  latency_summary after_ok_ms;
  double offered_per_s = 0;     // rate x listening
  double achieved_per_s = 0;    // delivered / max(window, first send -> last receipt)
  double span_s = 0;            // first send -> last receipt
  double drain_s = 0;           // the window's end -> the last receipt awaited
  bool drain_cut = false;       // --drain-wait ran out while deliveries were still coming
  double receiver_cpu_s = 0;    // CPU of the receiver threads over the step
  double receiver_busy = 0;     // that over (threads x the step's wall time), 0..1
};

struct sweep_result {
  load_options options;
  std::string started_at;
  size_t receiver_threads = 0;
  std::vector<sweep_step_result> steps;
  std::optional<size_t> knee;  // index into steps
  std::string knee_reason;
  std::vector<std::string> errors;
  bool clean() const;
};

// The first step past `p99_ms` delivery p99 or below `share` of its offered
// deliveries/s (a step that delivered nothing is past it); reason says which.
std::optional<size_t> find_knee(const std::vector<sweep_step_result>& steps, double p99_ms,
                                double share, std::string& reason);

// Every accepted event of `clock` owed to every listening subscriber: fills
// the step's expected, delivered, missed and OK-to-receipt latency.
void tally_deliveries(const publish_clock& clock, const std::vector<const subscriber*>& listening,
                      sweep_step_result& step);

std::string to_json(const sweep_result& r);
std::string to_markdown(const sweep_result& r);

// `waggle-load run --workload fanout --sweep N1,N2,...`.
int run_sweep(const load_options& o);

}  // namespace waggle::bench
