#pragma once

// The push workload (issue 15; docs/benchmarks.md, "Push"): one member posts
// kind 9 messages with an `h` tag to one open permanent channel, a step per
// rate. Scenario A: nobody holds a lease, so no wake is owed and the figure
// is what the push gate costs a hot channel. Scenario B: another member holds
// a lease (kind 30350) matching every message, so each accepted message owes
// exactly one wake at the tool's mock gateway. Per step: net commits per
// message (against an idle control of the same run), ack latency, wake
// latency (the OK the publisher read -> the gateway's receipt, by event id),
// wakes owed / received / duplicated, and whether the relay drained.

#include <optional>
#include <string>
#include <vector>

#include "bench/load/events.hpp"
#include "bench/load/options.hpp"
#include "bench/load/push_gateway_mock.hpp"
#include "bench/load/report.hpp"
#include "bench/load/roles.hpp"
#include "bench/load/stats.hpp"

namespace waggle::bench {

struct push_step_result {
  double rate = 0;  // messages/s offered
  double seconds = 0;
  outcome_counts outcomes;
  size_t unanswered = 0;
  latency_summary ack_ms;   // scheduled send -> OK (open loop)
  size_t wakes_owed = 0;    // accepted messages that owe a wake (B)
  size_t wakes_received = 0;  // of those, with at least one wake at the gateway
  size_t wakes_missing = 0;
  size_t wake_duplicates = 0;  // receipts beyond the first of an owed event
  size_t wake_retries = 0;     // of those, with the first one's request_id (a retry, not a second wake)
  size_t wakes_unexpected = 0; // wakes for this step's messages that owed none (A, or not accepted)
  size_t shortfall_at_drain = 0;  // owed wakes not in when the drain wait ended
  double drain_s = 0;          // the step's end -> every owed wake in (or the wait ran out)
  latency_summary wake_ms;     // OK -> first receipt at the gateway
  // The relay's push queues after the step (with --database-url).
  bool queues_checked = false;
  bool queues_drained = false;
  long long match_queue_left = 0;  // push_match_queue rows
  long long outbox_left = 0;       // push_wake_outbox rows pending or sending
  std::optional<commit_count> commits;
};

struct push_idle_control {
  double window_s = 0;
  long long commits = 0;
  double per_s = 0;
};

struct push_result {
  load_options options;
  std::string started_at;
  std::string gateway_url;
  std::string channel;
  bool lease_accepted = false;
  std::optional<push_idle_control> idle;
  std::vector<push_step_result> steps;
  size_t gateway_requests = 0;
  size_t warmup_wakes = 0;     // wakes for the warm-up message (B: one is owed)
  size_t wakes_foreign = 0;    // naming no message of this run
  size_t wakes_malformed = 0;  // not a v1 wake, no Nostr authorization, X-Waggle-Delivery-Id
                               // other than its request_id, or another endpoint grant
  std::vector<std::string> errors;
  bool clean() const;
};

// What one step published: its events and when each was sent and acked.
struct push_step_book {
  const publish_clock* clock = nullptr;
  bool wakes_owed = false;  // B: each accepted message owes one wake
};

// Matches the gateway's requests to the steps' messages and fills each
// step's wake figures (owed, received, missing, duplicates, retries,
// unexpected, latency) and the run's foreign / malformed / warm-up counts.
// `grant`: the lease's endpoint grant ("" = not checked).
void tally_wakes(const std::vector<mock_push_gateway::wake>& wakes, const std::string& grant,
                 const std::string& warmup_id, const std::vector<push_step_book>& books,
                 push_result& out);

// How many distinct accepted events of `clock` have a wake among `wakes`.
size_t owed_received(const std::vector<mock_push_gateway::wake>& wakes, const publish_clock& clock);

std::string to_json(const push_result& r);
std::string to_markdown(const push_result& r);

// The key of a step in the JSON ("100", "2.5"), for `summarize --get steps/100/...`.
std::string rate_key(double rate);

// `waggle-load run --workload push`.
int run_push(const load_options& o);

}  // namespace waggle::bench
