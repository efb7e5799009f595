#pragma once

// Every setting of a node. Each has a flag, a WAGGLE_* environment variable
// and a key in a --config file (flag, then variable, then file win);
// `waggle serve --help` lists them, docs/operations.md explains them and
// docs/waggle.conf.example is generated from them. The option table is in
// config_options.cpp, the file's syntax in config_file.cpp.

#include <cstdint>
#include <map>
#include <string_view>
#include <string>
#include <vector>

#include "messages/proto/status.hpp"

namespace waggle {

struct node_config {
  std::string database_url;  // WAGGLE_DATABASE_URL
  std::string bind = "127.0.0.1";
  uint16_t port = 7777;
  size_t io_threads = 0;  // Beast threads; 0 = one per core (gateway::server)
  size_t scheduler_threads = 0;  // CAF workers; 0 = one per core
  size_t writers = 2;
  size_t readers = 2;
  size_t max_batch = 512;
  int64_t commit_delay_us = 2000;  // see ingest_settings
  size_t commit_siblings = 4;
  int64_t created_at_window = 900;
  int64_t auth_window = 60;
  size_t max_connections = 10000;
  size_t max_frame_bytes = 64 * 1024;
  size_t max_subscriptions = 64;
  size_t max_auth_keys = 16;  // NIP-42 keys one connection may prove
  size_t max_filters = 10;
  size_t max_filter_values = 500;
  uint32_t default_limit = 100;
  uint32_t max_limit = 500;
  bool search = true;
  // NIP-77 (docs/negentropy.md).
  bool negentropy = true;
  size_t max_neg_sessions = 4;     // per connection
  size_t max_neg_items = 500000;   // per session
  size_t max_neg_bytes_total = 256u << 20;  // the node's NIP-77 sets, apart from subscriptions
  std::vector<std::string> sync_pubkeys;  // may submit others' events of any age
  uint32_t search_max_ranked = 2000;  // newest matches a search ranks
  int64_t search_timeout_ms = 2000;   // a search statement's ceiling  // NIP-50 (docs/search.md); off: a filter with `search` is refused
  size_t max_outbound_frames = 2000;
  // Subscription memory (docs/operations.md, "Subscription memory").
  size_t max_subscription_bytes = 1u << 20;          // per connection
  size_t max_subscription_bytes_total = 256u << 20;  // the whole node
  // Unsent history a connection may hold, and how long its queued histories
  // may go without the socket taking a slice (docs/operations.md).
  size_t max_history_bytes_per_connection = 16u << 20;
  int history_stall_seconds = 60;
  uint32_t history_page_rows = 100;
  // Admission and outbound memory (gateway::server_limits, docs/operations.md).
  size_t max_connections_per_ip = 64;
  double new_connections_per_second = 10;
  double new_connections_burst = 40;
  unsigned ipv6_prefix = 64;  // IPv6 clients are counted per /64 (16..128)
  std::vector<std::string> trusted_proxies;
  int auth_deadline_seconds = 15;
  size_t max_unauthenticated = 0;  // 0: max_connections / 4
  // POST /events in flight (each an actor until it is answered), on the node
  // and per community; beyond either, 503 at once (0 = no cap).
  size_t max_http_submits = 1024;
  size_t max_http_submits_per_community = 256;
  size_t max_http_submits_per_ip = 32;
  // NIP-43 invite codes open (unclaimed, unexpired) at once (0 = no cap).
  int64_t max_open_invites_per_admin = 100;
  int64_t max_open_invites_per_community = 1000;
  size_t health_reserve = 16;
  size_t max_outbound_bytes_total = 256u << 20;
  size_t socket_send_buffer = 256u << 10;
  int write_stall_seconds = 30;
  // Reads (docs/protocol.md, "Read limits"): REQ/COUNT in flight per
  // connection, the reader sessions' statement_timeout, how long a
  // connection waits for a read, and the token buckets (tokens per second,
  // burst; rate 0 = no bucket).
  size_t max_reads_in_flight = 8;
  int64_t read_statement_timeout_ms = 5000;
  // Read replicas (docs/replicas.md): one pool per URL, routed reads only
  // under the heartbeat proof.
  std::vector<std::string> read_database_urls;  // WAGGLE_READ_DATABASE_URL (whitespace-separated)
  size_t replica_pool_size = 4;
  size_t replica_leases_per_community = 0;  // 0: half of all replica connections (at least 1)
  int64_t replica_reserved_connections = -1;  // -1: half of all replica connections (at least 1)
  int64_t replica_acquire_budget_ms = 150;
  int64_t replica_read_max_age_ms = 0;  // bounded head reads; 0 = off
  bool bounded_replica_reads() const {
    return replica_read_max_age_ms > 0 && !read_database_urls.empty();
  }
  int64_t heartbeat_interval_ms = 500;
  int64_t heartbeat_stale_ms = 5000;
  int64_t read_timeout_ms = 30000;
  int64_t read_rate_connection = 1000;
  int64_t read_burst_connection = 2000;
  int64_t read_rate_pubkey = 2000;
  int64_t read_burst_pubkey = 4000;
  int64_t read_rate_address = 5000;
  int64_t read_burst_address = 10000;
  // Refusal pacing (docs/protocol.md): refused frames forgiven per second,
  // the burst before a flooding socket stops being read (rate 0 = off), and
  // the longest pause.
  int64_t refusal_rate = 20;
  int64_t refusal_burst = 100;
  int64_t refusal_max_pause_ms = 10000;
  int ping_seconds = 30;
  int drain_seconds = 10;
  int ttl_reap_seconds = 60;     // TTL reaper sweep interval (0 = off)
  size_t group_sessions = 2;     // database sessions for NIP-29 commands and rosters
  size_t max_group_queue_per_community = 1000;  // waiting NIP-29 commands per community
  int roster_idle_seconds = 60;  // an idle roster actor is stopped after this (0 = never)
  int expiry_reap_seconds = 10;  // NIP-40 expiration reaper interval (0 = off)
  int startup_timeout_seconds = 60;  // fence probe and roster repair must finish by then
  std::string relay_name = "waggle";
  std::string relay_description = "A Nostr relay for team chat";
  std::string relay_key_file;  // default: $WAGGLE_DATA_DIR/relay.key
  std::string data_dir = ".waggle";
  std::string log_level = "info";
  std::string trace_file;     // empty: no trace (docs/traces.md)
  uint64_t trace_sample = 0;  // 0: the whole node; N: every N-th connection only
  // strfry-style write-policy plugin (docs/write-policy.md); empty: none.
  std::string write_policy;
  size_t write_policy_queue = 1000;       // events awaiting a verdict
  int64_t write_policy_timeout_ms = 2000; // per event
  std::string write_policy_fail = "closed";  // or "open"
  // Keys (hex) that may manage every community over NIP-86.
  std::vector<std::string> operator_pubkeys;
  // Operator listeners (docs/delivery.md): listener key (64 hex) -> URL,
  // from "<key>=<url>,..."; empty: outbox rows are written and reaped, never sent.
  std::string operator_listeners_text;
  std::map<std::string, std::string> operator_listeners;
  uint32_t delivery_slots = 10;            // requests in flight at most
  uint32_t delivery_per_listener = 4;      // of those, to one listener at most
  int64_t delivery_timeout_ms = 5000;      // one POST, start to answer
  std::string listen_database_url;         // the LISTEN connection; default database_url
  int64_t listener_probe_ms = 2000;        // liveness probe interval
  int64_t listener_probe_timeout_ms = 1000;  // a probe not back by then: listener down
  // Push (docs/push.md): empty gateway URL, no push deliveries (leases are
  // still accepted).
  std::string push_gateway_url;
  uint32_t push_slots = 10;               // gateway requests in flight at most
  uint32_t push_lease_quota = 10;         // live leases per member and community
  int64_t push_backfill_seconds = 120;    // an activation re-enqueues this much history
  int64_t push_match_interval_ms = 50;    // under load, a matcher batch at most this often
  int64_t push_completion_delay_ms = 50;  // gateway answers held for one transaction
  bool push_gate_cache = true;            // off: every batch runs the gate statement
  // The bus (docs/bus.md): inproc, postgres, caf or nats; this node's id in
  // the cluster (empty: host name and port, random with an ephemeral port);
  // where the CAF driver listens; the NATS server of the nats driver.
  std::string bus = "inproc";
  std::string node_id;
  std::string bus_bind = "127.0.0.1";
  uint16_t bus_port = 0;
  std::string nats_url = "nats://127.0.0.1:4222";
  // How often the node's bus probe times a message round the bus
  // (actors/bus/bus_probe.hpp).
  int64_t bus_probe_ms = 10000;
  // With a bus that reaches other nodes, how often the cluster tail reads
  // what every node committed even if no doorbell rang (docs/scaling.md).
  int64_t cluster_poll_ms = 500;
  // Off: the tail ignores other nodes' doorbells and reads on its poll only.
  bool cluster_doorbell = true;
  // Off: every node publishes the rosters of the channels it changed itself
  // (the fence still orders them) instead of asking the channel's owner.
  bool roster_routing = true;
  // Who may read /metrics: "loopback", "any" or a comma-separated list of IPs.
  std::string metrics_allow = "loopback";

  // Field by field: the tests compare what a source yields with the defaults.
  bool operator==(const node_config&) const = default;
};

struct option_doc {
  std::string flag;  // "--port"
  std::string env;   // "WAGGLE_PORT"
  std::string help;
  std::string default_value;
};

// The documented options of `waggle serve`.
const std::vector<option_doc>& serve_options();

// The environment as parse_serve_config reads it: variable -> value. A
// variable set to the empty string counts as unset.
using env_map = std::map<std::string, std::string>;

// The WAGGLE_* variables of the option table that this process has.
env_map serve_environment();

// Fills `cfg` from the --config file argv names (if any), then the
// environment, then the other flags of argv, each over the last; then checks
// the whole. Unknown flags, malformed numbers and every refusal of the file
// (config_file.hpp) are errors; a value the file set that a check across
// options refuses is named with its file and line.
status parse_serve_config(node_config& cfg, const std::vector<std::string>& args);
// The same with the environment given (tests).
status parse_serve_config(node_config& cfg, const std::vector<std::string>& args,
                          const env_map& env);

std::string serve_usage();

// Whether the node runs delivery actors (operator listeners, push, or both).
inline bool delivery_enabled(const node_config& cfg) {
  return !cfg.operator_listeners.empty() || !cfg.push_gateway_url.empty();
}

// --operator-listeners: "<64 hex key>=<http(s) url>,...", spaces around
// entries ignored. The error names the bad entry (its position and text) and
// what is wrong with it; a key listed twice is an error too.
status parse_operator_listeners(std::string_view text, std::map<std::string, std::string>& out);

}  // namespace waggle
