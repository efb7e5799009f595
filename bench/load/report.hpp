#pragma once

// The result of one run, its JSON and markdown renderings, and the medians of
// several runs (`waggle-load summarize`).

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "bench/load/listener_run.hpp"
#include "bench/load/options.hpp"
#include "bench/load/roles.hpp"
#include "bench/load/stats.hpp"

namespace waggle::bench {

struct commit_count {
  double window_s = 0;
  long long gross = 0;         // xact_commit delta over the run's window
  long long idle_control = 0;  // the same delta over an idle window of equal length
  long long net = 0;
  double per_message = 0;      // net / accepted
};

struct run_result {
  load_options options;
  std::string started_at;  // UTC, ISO 8601
  size_t connections_open = 0;
  outcome_counts outcomes;
  size_t unanswered = 0;
  double elapsed_s = 0;    // first send to last answer
  double per_s = 0;        // accepted (events, or REQs for history) per second
  latency_summary ack_ms;  // publish -> OK, or REQ -> EOSE
  size_t history_events = 0;
  // fanout
  size_t subscribers = 0;
  size_t fanout_expected = 0;
  size_t fanout_delivered = 0;
  size_t fanout_missed = 0;
  size_t fanout_duplicates = 0;
  latency_summary delivery_ms;
  latency_summary delivery_after_ok_ms;  // the publisher's OK to each receipt
  std::optional<listener_result> listeners;
  std::optional<commit_count> commits;
  std::optional<double> relay_rss_mib;
  std::optional<double> relay_peak_rss_mib;
  // --cpu-watch: cores by process name over the measured window, then "tool"
  // and "machine_busy" (0..1).
  std::vector<std::pair<std::string, double>> cpu;
  std::vector<std::string> errors;
};

std::string to_json(const run_result& r);
std::string to_markdown(const run_result& r);

// Median of every numeric field under "results" across the given JSON
// documents (settings are taken from the first). Returns the summary JSON and
// its markdown; error text when an input is unreadable.
struct summary {
  std::string json;
  std::string markdown;
  std::string error;
  std::map<std::string, double> medians;  // by path under "results"
};
summary summarize_runs(const std::vector<std::string>& json_texts, const std::string& label);

std::string machine_description();
std::string utc_now();  // ISO 8601, for started_at

}  // namespace waggle::bench
