#pragma once

// Command line of `waggle-load` (see usage()).

#include <cstdint>
#include <string>
#include <variant>
#include <vector>

namespace waggle::bench {

enum class workload { publish, chat, history, fanout, idle, listener_latency, listener_burst, push };

const char* to_string(workload w);

struct load_options {
  std::string url = "ws://127.0.0.1:7777";  // the first of `urls`
  // Several nodes of one cluster (docs/scaling.md): connection i goes to
  // urls[i % n]; subscribers to subscriber_urls[j % m] (default: urls), so a
  // publisher on one node and a subscriber on another time a cross-node
  // delivery on one clock. Only the plain run (not push, sweep, listeners).
  std::vector<std::string> urls{"ws://127.0.0.1:7777"};
  std::vector<std::string> subscriber_urls;
  std::string host;  // Host header; default: the URL's authority
  workload kind = workload::publish;
  size_t connections = 1;
  size_t in_flight = 1;  // closed loop: events (or REQs) outstanding per connection
  double rate = 0;       // open loop: events/s over all connections (0 = closed loop)
  double duration = 10;  // seconds of load
  size_t events = 0;     // closed loop: events signed ahead (0 = enough for 8,000/s)
  size_t channels = 4;
  double mention_share = 0.2;
  size_t subscribers = 0;  // live subscribers counting what they receive
  size_t content_bytes = 200;
  std::string channel_prefix;  // history: channels made by `seed` (default: fresh ones)
  // history: every REQ asks `until` this many seconds before the run's start
  // (-1: no until, a head read). Older than ~16 min, a replica may serve it
  // as "covered" (docs/replicas.md).
  double until_age = -1;
  // history: NIP-50 search REQs {"search":W,"#h":[channel],"limit":50}, one
  // per word and channel in turn, instead of {kinds:[9],...}.
  std::vector<std::string> search;
  std::string database_url;    // net commits per accepted message
  double control_seconds = -1;  // idle control window (-1 = same as the run's window)
  int relay_pid = 0;            // report the relay's RSS
  // --cpu-watch "node0=PID,pg=PID+": cores each used over the measured
  // window ('+': with its children), with the tool's and the machine's.
  std::string cpu_watch;
  size_t threads = 1;           // io threads of the tool (publishers, queriers, idle connections)
  size_t receiver_threads = 0;  // subscribers' io threads (0 = one per core)
  size_t connect_parallel = 256;
  std::string label;
  std::string json_path;
  std::string markdown_path;
  bool progress = true;
  // Operator listeners (docs/delivery.md): the tool serves one receiver per
  // port (listener i = `listener_key(i)`, as `listener-config` printed it for
  // the relay's --operator-listeners); the last `stalled_listeners` never answer.
  std::vector<uint16_t> listener_ports;
  size_t stalled_listeners = 0;
  size_t mentions = 0;        // listener-latency (default 20), listener-burst (default 1,000)
  double gap_min = 2.5;       // listener-latency: seconds between mentions, uniform in [min, max]
  double gap_max = 4.0;
  double delivery_wait = 120;  // seconds after the load for the last deliveries
  // Push (docs/push.md; bench/load/push_run.hpp): the tool serves a mock push
  // gateway on this port (the relay's --push-gateway-url names it) and runs
  // one step per rate. Scenario A: messages, no lease; B: a member's lease
  // matches every message; idle: the idle control alone (commits/s).
  std::string push_scenario;  // "A", "B" or "idle"
  std::vector<double> push_rates{5, 10, 30, 50, 100};
  double step_seconds = -1;  // -1 = the workload's default: push 60, fanout sweep 10
  uint16_t push_gateway_port = 0;
  // Per step: push, seconds for the owed wakes and the relay's queues (30);
  // fanout sweep, at most this long for the last deliveries (120).
  double drain_wait = -1;  // -1 = the workload's default
  // Fanout sweep (bench/load/sweep_run.hpp): one step per subscriber count,
  // each --step-seconds at --rate (default 100/s) on a fresh channel. The knee
  // is the first step whose delivery p99 exceeds knee_p99_ms or whose
  // deliveries/s fall below knee_share of those offered.
  std::vector<size_t> sweep;
  double knee_p99_ms = 20;
  double knee_share = 0.9;
  bool sweeping() const { return !sweep.empty(); }
  bool listeners() const { return !listener_ports.empty(); }
};

struct listener_config_options {
  std::vector<uint16_t> ports;
};

struct seed_options {
  std::string url = "ws://127.0.0.1:7777";  // for the channel set-up (commands go through the relay)
  std::string host;
  std::string database_url;
  size_t events = 1'000'000;
  size_t channels = 20;
  size_t authors = 50;
  size_t content_bytes = 200;
  std::string channel_prefix = "hist";
  size_t threads = 2;
};

struct summarize_options {
  std::vector<std::string> inputs;
  std::string json_path;
  std::string markdown_path;
  std::string label;
  std::vector<std::string> get;  // print these medians (or settings), one per line, and nothing else
};

std::string usage();

// Each returns the options or an error message.
std::variant<load_options, std::string> parse_load_options(std::vector<std::string> args);
std::variant<seed_options, std::string> parse_seed_options(std::vector<std::string> args);
std::variant<summarize_options, std::string> parse_summarize_options(std::vector<std::string> args);
std::variant<listener_config_options, std::string> parse_listener_config_options(
  std::vector<std::string> args);

}  // namespace waggle::bench
