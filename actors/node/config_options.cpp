#include "actors/node/config_options.hpp"

#include <cctype>
#include <charconv>
#include <limits>
#include <sstream>
#include <type_traits>

#include "gateway/metrics_access.hpp"

// The option table of `waggle serve`, apart from the code that reads flags and
// the environment into it (config.cpp): a new setting is one entry here.

namespace waggle {

namespace {

std::string out_of_range(const std::string& min, const std::string& max) {
  return "out of range (" + min + ".." + max + ")";
}

// A whole number that fits the field; the reason names what is wrong.
template <class T>
option_setter number(T node_config::*field) {
  return [field](node_config& cfg, const std::string& text) -> std::string {
    T value{};
    auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (ec == std::errc::result_out_of_range)
      return out_of_range(std::to_string(std::numeric_limits<T>::min()),
                          std::to_string(std::numeric_limits<T>::max()));
    if (ec != std::errc{} || ptr != text.data() + text.size())
      return std::is_unsigned_v<T> && text.starts_with('-') ? "must not be negative"
                                                             : "not a number";
    cfg.*field = value;
    return {};
  };
}

option_setter text(std::string node_config::*field) {
  return [field](node_config& cfg, const std::string& value) -> std::string {
    cfg.*field = value;
    return {};
  };
}

// The words every switch takes, from a flag, the environment or a file alike.
option_setter on_off(bool node_config::*field) {
  return [field](node_config& cfg, const std::string& value) -> std::string {
    if (value != "on" && value != "off")
      return "not on or off";
    cfg.*field = value == "on";
    return {};
  };
}

// A non-negative decimal ("2.5"); from_chars for double is in GCC 11+.
option_setter decimal(double node_config::*field) {
  return [field](node_config& cfg, const std::string& text) -> std::string {
    double value{};
    auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (ec != std::errc{} || ptr != text.data() + text.size())
      return "not a number";
    if (value < 0)
      return "must not be negative";
    cfg.*field = value;
    return {};
  };
}

// The entries of a list, separated by commas, whitespace or both: what an
// operator pastes from one place or another, and empty entries skipped.
std::vector<std::string> split_list(const std::string& value) {
  std::vector<std::string> out;
  std::string entry;
  for (char c : value + ',') {
    if (c == ',' || std::isspace(static_cast<unsigned char>(c))) {
      if (!entry.empty())
        out.push_back(std::move(entry));
      entry.clear();
    } else {
      entry += c;
    }
  }
  return out;
}

std::string bad_entry(size_t index, const std::string& entry, const char* why) {
  return "entry " + std::to_string(index + 1) + " (\"" + entry + "\") is not " + why;
}

// A list of hex keys; one bad key fails the whole option.
option_setter pubkey_list(std::vector<std::string> node_config::*field) {
  return [field](node_config& cfg, const std::string& value) -> std::string {
    auto keys = split_list(value);
    for (size_t i = 0; i < keys.size(); ++i)
      if (keys[i].size() != 64 || keys[i].find_first_not_of("0123456789abcdef") != std::string::npos)
        return bad_entry(i, keys[i], "64 lowercase hex characters");
    cfg.*field = std::move(keys);
    return {};
  };
}

// Proxy IP addresses (checked by the gateway, which drops what is not one:
// here only the shape).
std::string set_trusted_proxies(node_config& cfg, const std::string& value) {
  auto ips = split_list(value);
  for (size_t i = 0; i < ips.size(); ++i)
    if (ips[i].find_first_not_of("0123456789abcdefABCDEF.:") != std::string::npos)
      return bad_entry(i, ips[i], "an IP address");
  cfg.trusted_proxies = std::move(ips);
  return {};
}

// Whitespace only: a PostgreSQL URL may hold commas (several hosts). Each
// source replaces the list (flags win, whole); repeated flags are joined
// before they get here.
std::string set_read_database_urls(node_config& cfg, const std::string& value) {
  cfg.read_database_urls.clear();
  std::istringstream in{value};
  for (std::string url; in >> url;)
    cfg.read_database_urls.push_back(url);
  return {};
}

}  // namespace

const std::vector<serve_option>& serve_option_table() {
  static const std::vector<serve_option> all = {
    {{"--database-url", "WAGGLE_DATABASE_URL", "PostgreSQL URL of the primary (writer)", ""},
     text(&node_config::database_url)},
    {{"--bind", "WAGGLE_BIND", "address to listen on", "127.0.0.1"}, text(&node_config::bind)},
    {{"--port", "WAGGLE_PORT", "port to listen on (0 = ephemeral)", "7777"},
     number(&node_config::port)},
    {{"--io-threads", "WAGGLE_IO_THREADS", "socket threads (Beast; 0 = one per core)", "0"},
     number(&node_config::io_threads)},
    {{"--scheduler-threads", "WAGGLE_SCHEDULER_THREADS",
      "actor scheduler threads (0 = one per core)", "0"},
     number(&node_config::scheduler_threads)},
    {{"--writers", "WAGGLE_WRITERS", "writer sessions (connections) for ingest", "2"},
     number(&node_config::writers)},
    {{"--ttl-reap-seconds", "WAGGLE_TTL_REAP_SECONDS",
      "how often expired ephemeral channels are archived (0 = never)", "60"},
     number(&node_config::ttl_reap_seconds)},
    {{"--expiry-reap-seconds", "WAGGLE_EXPIRY_REAP_SECONDS",
      "how often expired events (NIP-40) are deleted (0 = never; they are hidden anyway)", "10"},
     number(&node_config::expiry_reap_seconds)},
    {{"--startup-timeout", "WAGGLE_STARTUP_TIMEOUT",
      "seconds to wait for the database at start-up (roster fence check)", "60"},
     number(&node_config::startup_timeout_seconds)},
    {{"--readers", "WAGGLE_READERS", "reader sessions (connections) for REQ/COUNT", "2"},
     number(&node_config::readers)},
    {{"--group-sessions", "WAGGLE_GROUP_SESSIONS",
      "sessions (connections) for NIP-29 commands and roster publications", "2"},
     number(&node_config::group_sessions)},
    {{"--max-group-queue-per-community", "WAGGLE_MAX_GROUP_QUEUE_PER_COMMUNITY",
      "NIP-29 commands waiting per community before OK false rate-limited", "1000"},
     number(&node_config::max_group_queue_per_community)},
    {{"--roster-idle-seconds", "WAGGLE_ROSTER_IDLE_SECONDS",
      "stop a channel's roster actor after this long without a change (0 = never)", "60"},
     number(&node_config::roster_idle_seconds)},
    {{"--commit-delay-us", "WAGGLE_COMMIT_DELAY_US",
      "hold an ingest batch up to this long for more events while several connections publish "
      "(0 = never)",
      "2000"},
     number(&node_config::commit_delay_us)},
    {{"--commit-siblings", "WAGGLE_COMMIT_SIBLINGS",
      "authors publishing within 10 x the commit delay before batches are held (2..32)", "4"},
     number(&node_config::commit_siblings)},
    {{"--max-batch", "WAGGLE_MAX_BATCH", "most events in one ingest transaction", "512"},
     number(&node_config::max_batch)},
    {{"--created-at-window", "WAGGLE_CREATED_AT_WINDOW",
      "seconds an event's created_at may differ from now", "900"},
     number(&node_config::created_at_window)},
    {{"--auth-window", "WAGGLE_AUTH_WINDOW", "seconds of tolerance for NIP-42/NIP-98 events",
      "60"},
     number(&node_config::auth_window)},
    {{"--max-connections", "WAGGLE_MAX_CONNECTIONS", "open WebSockets before 503", "10000"},
     number(&node_config::max_connections)},
    {{"--max-frame-bytes", "WAGGLE_MAX_FRAME_BYTES", "largest WebSocket frame (close 1009)",
      "65536"},
     number(&node_config::max_frame_bytes)},
    {{"--max-subscriptions", "WAGGLE_MAX_SUBSCRIPTIONS", "live subscriptions per connection",
      "64"},
     number(&node_config::max_subscriptions)},
    {{"--max-auth-keys", "WAGGLE_MAX_AUTH_KEYS",
      "keys one connection may authenticate with NIP-42 AUTH (then rate-limited:)", "16"},
     number(&node_config::max_auth_keys)},
    {{"--max-filters", "WAGGLE_MAX_FILTERS", "filters per REQ/COUNT", "10"},
     number(&node_config::max_filters)},
    {{"--max-filter-values", "WAGGLE_MAX_FILTER_VALUES", "values per filter list", "500"},
     number(&node_config::max_filter_values)},
    {{"--default-limit", "WAGGLE_DEFAULT_LIMIT", "history limit of a filter without one", "100"},
     number(&node_config::default_limit)},
    {{"--max-limit", "WAGGLE_MAX_LIMIT", "largest history limit (larger ones are clamped)",
      "500"},
     number(&node_config::max_limit)},
    {{"--search", "WAGGLE_SEARCH",
      "NIP-50 full-text search in REQ and COUNT (docs/search.md): on, or off (a filter with "
      "`search` is CLOSED invalid:, and NIP-11 does not list 50)",
      "on"},
     on_off(&node_config::search)},
    {{"--search-max-ranked", "WAGGLE_SEARCH_MAX_RANKED",
      "a search ranks at most the newest this many matches (docs/search.md, \"Cost\")", "2000"},
     number(&node_config::search_max_ranked)},
    {{"--search-timeout-ms", "WAGGLE_SEARCH_TIMEOUT_MS",
      "a search statement (REQ or COUNT) runs at most this long, within the read's own "
      "--read-statement-timeout-ms",
      "2000"},
     number(&node_config::search_timeout_ms)},
    {{"--negentropy", "WAGGLE_NEGENTROPY",
      "NIP-77 negentropy sync (NEG-OPEN); off: NEG-* frames are refused and NIP-11 omits 77",
      "on"},
     on_off(&node_config::negentropy)},
    {{"--max-neg-sessions", "WAGGLE_MAX_NEG_SESSIONS",
      "NIP-77 sessions open at once on one connection", "4"},
     number(&node_config::max_neg_sessions)},
    {{"--max-neg-items", "WAGGLE_MAX_NEG_ITEMS",
      "events one NIP-77 session may reconcile; a filter matching more is refused", "500000"},
     number(&node_config::max_neg_items)},
    {{"--max-neg-bytes-total", "WAGGLE_MAX_NEG_BYTES_TOTAL",
      "bytes the NIP-77 sets of all connections together may hold, apart from subscriptions "
      "(0 = no limit)",
      "268435456"},
     number(&node_config::max_neg_bytes_total)},
    {{"--max-outbound-frames", "WAGGLE_MAX_OUTBOUND_FRAMES",
      "frames queued to a client before it is dropped as a slow consumer", "2000"},
     number(&node_config::max_outbound_frames)},
    {{"--max-subscription-bytes", "WAGGLE_MAX_SUBSCRIPTION_BYTES",
      "bytes of subscription state (filters, history ids) one connection may hold "
      "(0 = no limit)",
      "1048576"},
     number(&node_config::max_subscription_bytes)},
    {{"--max-subscription-bytes-total", "WAGGLE_MAX_SUBSCRIPTION_BYTES_TOTAL",
      "bytes of subscription state and unsent histories all connections together may hold "
      "(0 = no limit)",
      "268435456"},
     number(&node_config::max_subscription_bytes_total)},
    {{"--max-history-bytes-per-connection", "WAGGLE_MAX_HISTORY_BYTES_PER_CONNECTION",
      "bytes of unsent history one connection may hold; a larger one is CLOSED rate-limited: "
      "(0 = no limit)",
      "16777216"},
     number(&node_config::max_history_bytes_per_connection)},
    {{"--history-stall-seconds", "WAGGLE_HISTORY_STALL_SECONDS",
      "queued histories the socket took no slice of for this long are CLOSED rate-limited: "
      "(0 = never)",
      "60"},
     number(&node_config::history_stall_seconds)},
    {{"--history-page-rows", "WAGGLE_HISTORY_PAGE_ROWS",
      "a REQ's history is read in pages, the first of this many events per filter, each next "
      "one twice as large, read as the socket drains (0 = the whole history at once)",
      "100"},
     number(&node_config::history_page_rows)},
    {{"--max-connections-per-ip", "WAGGLE_MAX_CONNECTIONS_PER_IP",
      "open connections (WebSockets and pending HTTP) per client address before 429 (0 = no cap)",
      "64"},
     number(&node_config::max_connections_per_ip)},
    {{"--new-connections-per-second", "WAGGLE_NEW_CONNECTIONS_PER_SECOND",
      "new connections per client address and second, refilling the burst (0 = no limit)", "10"},
     decimal(&node_config::new_connections_per_second)},
    {{"--new-connections-burst", "WAGGLE_NEW_CONNECTIONS_BURST",
      "new connections a client address may open at once before 429", "40"},
     decimal(&node_config::new_connections_burst)},
    {{"--ipv6-prefix", "WAGGLE_IPV6_PREFIX",
      "IPv6 clients count as one address per prefix of this many bits, for every per-address "
      "limit (16..128; IPv4 per address)",
      "64"},
     number(&node_config::ipv6_prefix)},
    {{"--trusted-proxies", "WAGGLE_TRUSTED_PROXIES",
      "comma-separated proxy IPs whose X-Forwarded-For names the client (else it is ignored)",
      ""},
     set_trusted_proxies},
    {{"--auth-deadline-seconds", "WAGGLE_AUTH_DEADLINE_SECONDS",
      "a WebSocket without a successful NIP-42 AUTH by then is closed (0 = never)", "15"},
     number(&node_config::auth_deadline_seconds)},
    {{"--max-unauthenticated", "WAGGLE_MAX_UNAUTHENTICATED",
      "WebSockets not yet authenticated before 503 (0 = max-connections / 4)", "0"},
     number(&node_config::max_unauthenticated)},
    {{"--max-http-submits", "WAGGLE_MAX_HTTP_SUBMITS",
      "POST /events in flight on the node before 503 (0 = no cap)", "1024"},
     number(&node_config::max_http_submits)},
    {{"--max-http-submits-per-community", "WAGGLE_MAX_HTTP_SUBMITS_PER_COMMUNITY",
      "POST /events in flight for one community before 503 (0 = no cap)", "256"},
     number(&node_config::max_http_submits_per_community)},
    {{"--max-http-submits-per-ip", "WAGGLE_MAX_HTTP_SUBMITS_PER_IP",
      "POST /events in flight from one client address before 503 (0 = no cap)", "32"},
     number(&node_config::max_http_submits_per_ip)},
    {{"--max-open-invites-per-admin", "WAGGLE_MAX_OPEN_INVITES_PER_ADMIN",
      "NIP-43 invite codes one owner or admin may hold open at once (0 = no cap)", "100"},
     number(&node_config::max_open_invites_per_admin)},
    {{"--max-open-invites-per-community", "WAGGLE_MAX_OPEN_INVITES_PER_COMMUNITY",
      "NIP-43 invite codes open in one community at once (0 = no cap)", "1000"},
     number(&node_config::max_open_invites_per_community)},
    {{"--health-reserve", "WAGGLE_HEALTH_RESERVE",
      "TCP connections above the cap kept for /healthz, /readyz and /metrics", "16"},
     number(&node_config::health_reserve)},
    {{"--max-outbound-bytes-total", "WAGGLE_MAX_OUTBOUND_BYTES_TOTAL",
      "bytes queued to all clients together; beyond it the biggest queue is dropped (0 = no cap)",
      "268435456"},
     number(&node_config::max_outbound_bytes_total)},
    {{"--socket-send-buffer", "WAGGLE_SOCKET_SEND_BUFFER",
      "SO_SNDBUF of each client socket in bytes (0 = kernel autotuning)", "262144"},
     number(&node_config::socket_send_buffer)},
    {{"--write-stall-seconds", "WAGGLE_WRITE_STALL_SECONDS",
      "a client whose queued frames make no write progress this long is dropped (0 = never)",
      "30"},
     number(&node_config::write_stall_seconds)},
    {{"--max-reads-in-flight", "WAGGLE_MAX_READS_IN_FLIGHT",
      "REQ/COUNT reads a connection may have in flight (more: CLOSED rate-limited:)", "8"},
     number(&node_config::max_reads_in_flight)},
    {{"--read-statement-timeout-ms", "WAGGLE_READ_STATEMENT_TIMEOUT_MS",
      "time one read may spend in the database, all its statements together "
      "(below --read-timeout-ms)",
      "5000"},
     number(&node_config::read_statement_timeout_ms)},
    {{"--read-database-url", "WAGGLE_READ_DATABASE_URL",
      "a read replica (streaming standby) for history, COUNT and search under the heartbeat "
      "proof (docs/replicas.md); repeat the flag, or separate URLs by whitespace, for several",
      ""},
     set_read_database_urls, /*repeatable=*/true},
    {{"--replica-pool-size", "WAGGLE_REPLICA_POOL_SIZE", "connections per read replica at most",
      "4"},
     number(&node_config::replica_pool_size)},
    {{"--replica-leases-per-community", "WAGGLE_REPLICA_LEASES_PER_COMMUNITY",
      "replica connections one community's reads may hold at once, all replicas together; "
      "beyond, its reads go to the writer (0 = half of all replica connections, at least 1)",
      "0"},
     number(&node_config::replica_leases_per_community)},
    {{"--replica-reserved-connections", "WAGGLE_REPLICA_RESERVED_CONNECTIONS",
      "replica connections kept free for communities with no read on a replica: a community "
      "already reading there takes another only while more than this many stay free (-1 = half "
      "of all replica connections, at least 1; 0 = no reserve)",
      "-1"},
     number(&node_config::replica_reserved_connections)},
    {{"--replica-acquire-budget-ms", "WAGGLE_REPLICA_ACQUIRE_BUDGET_MS",
      "how long a routed read waits for a replica connection before it reads on the writer",
      "150"},
     number(&node_config::replica_acquire_budget_ms)},
    {{"--replica-read-max-age-ms", "WAGGLE_REPLICA_READ_MAX_AGE_MS",
      "head reads may be served by a replica proved at most this old (0 = never: only pages "
      "below the proved fence wall go to replicas)",
      "0"},
     number(&node_config::replica_read_max_age_ms)},
    {{"--heartbeat-interval-ms", "WAGGLE_HEARTBEAT_INTERVAL_MS",
      "how often the heartbeat prober commits a replica freshness proof", "500"},
     number(&node_config::heartbeat_interval_ms)},
    {{"--heartbeat-stale-ms", "WAGGLE_HEARTBEAT_STALE_MS",
      "no proof newer than this: every routed read goes to the writer", "5000"},
     number(&node_config::heartbeat_stale_ms)},
    {{"--read-timeout-ms", "WAGGLE_READ_TIMEOUT_MS",
      "how long a connection waits for a read, queue included", "30000"},
     number(&node_config::read_timeout_ms)},
    {{"--read-rate-connection", "WAGGLE_READ_RATE_CONNECTION",
      "read tokens per second per connection (0 = unlimited)", "1000"},
     number(&node_config::read_rate_connection)},
    {{"--read-burst-connection", "WAGGLE_READ_BURST_CONNECTION",
      "read token burst per connection", "2000"},
     number(&node_config::read_burst_connection)},
    {{"--read-rate-pubkey", "WAGGLE_READ_RATE_PUBKEY",
      "read tokens per second per authenticated key, all its connections (0 = unlimited)",
      "2000"},
     number(&node_config::read_rate_pubkey)},
    {{"--read-burst-pubkey", "WAGGLE_READ_BURST_PUBKEY", "read token burst per key", "4000"},
     number(&node_config::read_burst_pubkey)},
    {{"--read-rate-address", "WAGGLE_READ_RATE_ADDRESS",
      "read tokens per second per client address, all its connections (0 = unlimited)",
      "5000"},
     number(&node_config::read_rate_address)},
    {{"--read-burst-address", "WAGGLE_READ_BURST_ADDRESS", "read token burst per address",
      "10000"},
     number(&node_config::read_burst_address)},
    {{"--refusal-rate", "WAGGLE_REFUSAL_RATE",
      "refused frames forgiven per second per connection; past the burst the socket stops "
      "being read for a while (0 = never)",
      "20"},
     number(&node_config::refusal_rate)},
    {{"--refusal-burst", "WAGGLE_REFUSAL_BURST",
      "refused frames a connection may get before its reading is paused", "100"},
     number(&node_config::refusal_burst)},
    {{"--refusal-max-pause-ms", "WAGGLE_REFUSAL_MAX_PAUSE_MS",
      "the longest pause of a flooding connection's reading", "10000"},
     number(&node_config::refusal_max_pause_ms)},
    {{"--ping-seconds", "WAGGLE_PING_SECONDS", "WebSocket ping interval", "30"},
     number(&node_config::ping_seconds)},
    {{"--drain-seconds", "WAGGLE_DRAIN_SECONDS", "bound on graceful shutdown", "10"},
     number(&node_config::drain_seconds)},
    {{"--relay-name", "WAGGLE_RELAY_NAME", "NIP-11 name", "waggle"},
     text(&node_config::relay_name)},
    {{"--relay-description", "WAGGLE_RELAY_DESCRIPTION", "NIP-11 description",
      "A Nostr relay for team chat"},
     text(&node_config::relay_description)},
    {{"--data-dir", "WAGGLE_DATA_DIR", "directory for the relay key", ".waggle"},
     text(&node_config::data_dir)},
    {{"--relay-key-file", "WAGGLE_RELAY_KEY_FILE",
      "the relay's secret key (created 0600 on first start; empty: relay.key in --data-dir)",
      ""},
     text(&node_config::relay_key_file)},
    {{"--log-level", "WAGGLE_LOG_LEVEL", "debug, info, warn or error", "info"},
     text(&node_config::log_level)},
    {{"--trace", "WAGGLE_TRACE",
      "record an actor trace (JSON lines) to this file, from when the node serves "
      "(docs/traces.md)",
      ""},
     text(&node_config::trace_file)},
    {{"--trace-sample", "WAGGLE_TRACE_SAMPLE",
      "with --trace: 0 records the whole node; N records only every N-th connection's own "
      "frames and readings",
      "0"},
     number(&node_config::trace_sample)},
    {{"--write-policy", "WAGGLE_WRITE_POLICY",
      "strfry-style write-policy plugin to run and ask about every event (docs/write-policy.md)",
      ""},
     text(&node_config::write_policy)},
    {{"--write-policy-queue", "WAGGLE_WRITE_POLICY_QUEUE",
      "events awaiting the plugin's verdict; beyond it the fail mode answers", "1000"},
     number(&node_config::write_policy_queue)},
    {{"--write-policy-timeout-ms", "WAGGLE_WRITE_POLICY_TIMEOUT_MS",
      "how long the plugin may take per event before it is killed and restarted", "2000"},
     number(&node_config::write_policy_timeout_ms)},
    {{"--write-policy-fail", "WAGGLE_WRITE_POLICY_FAIL",
      "while the plugin is down, hung or over its queue: closed refuses events, open accepts "
      "them",
      "closed"},
     text(&node_config::write_policy_fail)},
    {{"--operator-pubkeys", "WAGGLE_OPERATOR_PUBKEYS",
      "comma-separated hex pubkeys that may manage every community over NIP-86 "
      "(docs/management.md)",
      ""},
     pubkey_list(&node_config::operator_pubkeys)},
    {{"--sync-pubkeys", "WAGGLE_SYNC_PUBKEYS",
      "pubkeys that, once authenticated (NIP-42), may submit other authors' events of any age, "
      "as an import would (waggle sync --dir up)",
      ""},
     pubkey_list(&node_config::sync_pubkeys)},
    {{"--operator-listeners", "WAGGLE_OPERATOR_LISTENERS",
      "comma-separated <listener hex pubkey>=<http(s) url>: where mentions of their registered "
      "agents are delivered (docs/delivery.md); unset: none are sent",
      ""},
     text(&node_config::operator_listeners_text)},
    {{"--delivery-slots", "WAGGLE_DELIVERY_SLOTS", "listener deliveries in flight at most", "10"},
     number(&node_config::delivery_slots)},
    {{"--delivery-per-listener", "WAGGLE_DELIVERY_PER_LISTENER",
      "of the deliveries in flight, how many may go to one listener (a listener that never "
      "answers holds no more)",
      "4"},
     number(&node_config::delivery_per_listener)},
    {{"--delivery-timeout-ms", "WAGGLE_DELIVERY_TIMEOUT_MS",
      "how long one delivery POST may take, connect to answer", "5000"},
     number(&node_config::delivery_timeout_ms)},
    {{"--listen-database-url", "WAGGLE_LISTEN_DATABASE_URL",
      "the LISTEN connection of the delivery wake-ups (default: --database-url)", ""},
     text(&node_config::listen_database_url)},
    {{"--listener-probe-ms", "WAGGLE_LISTENER_PROBE_MS",
      "how often the LISTEN connection is probed with a NOTIFY of its own", "2000"},
     number(&node_config::listener_probe_ms)},
    {{"--listener-probe-timeout-ms", "WAGGLE_LISTENER_PROBE_TIMEOUT_MS",
      "a probe not back by then declares the listener down (deliveries poll)", "1000"},
     number(&node_config::listener_probe_timeout_ms)},
    {{"--push-gateway-url", "WAGGLE_PUSH_GATEWAY_URL",
      "where phone wakes are POSTed (docs/push.md); empty: push is off", ""},
     text(&node_config::push_gateway_url)},
    {{"--push-slots", "WAGGLE_PUSH_SLOTS", "push gateway requests in flight at most", "10"},
     number(&node_config::push_slots)},
    {{"--push-lease-quota", "WAGGLE_PUSH_LEASE_QUOTA",
      "live push leases one member may hold in a community", "10"},
     number(&node_config::push_lease_quota)},
    {{"--push-backfill-seconds", "WAGGLE_PUSH_BACKFILL_SECONDS",
      "how much recent history a lease activation matches", "120"},
     number(&node_config::push_backfill_seconds)},
    {{"--push-match-interval-ms", "WAGGLE_PUSH_MATCH_INTERVAL_MS",
      "while messages keep coming, the push matcher runs a batch at most this often", "50"},
     number(&node_config::push_match_interval_ms)},
    {{"--push-completion-delay-ms", "WAGGLE_PUSH_COMPLETION_DELAY_MS",
      "gateway answers are written together after at most this long (0: each at once)", "50"},
     number(&node_config::push_completion_delay_ms)},
    {{"--bus", "WAGGLE_BUS",
      "the bus driver between this node's actors and other nodes (docs/bus.md): inproc, "
      "postgres (a table and NOTIFY on the primary), caf (nodes connected directly) or nats "
      "(a NATS server, --nats-url)",
      "inproc"},
     text(&node_config::bus)},
    {{"--node-id", "WAGGLE_NODE_ID",
      "this node's id in the cluster, 1-64 of [A-Za-z0-9_-] (empty: the short host name and "
      "the port, e.g. web1-7777, so it survives a restart; random with an ephemeral port)",
      ""},
     text(&node_config::node_id)},
    {{"--bus-bind", "WAGGLE_BUS_BIND", "address the CAF bus listens on for its peers",
      "127.0.0.1"},
     text(&node_config::bus_bind)},
    {{"--bus-port", "WAGGLE_BUS_PORT", "port the CAF bus listens on (0 = ephemeral)", "0"},
     number(&node_config::bus_port)},
    {{"--nats-url", "WAGGLE_NATS_URL",
      "the NATS server of --bus nats (max_payload at least 1 MiB; docs/bus.md, \"NATS\")",
      "nats://127.0.0.1:4222"},
     text(&node_config::nats_url)},
    {{"--bus-probe-ms", "WAGGLE_BUS_PROBE_MS",
      "how often the node publishes a probe to itself over the bus and times its return "
      "(waggle_bus_probe_*; one not back within min(5 s, this) is lost)",
      "10000"},
     number(&node_config::bus_probe_ms)},
    {{"--cluster-poll-ms", "WAGGLE_CLUSTER_POLL_MS",
      "with --bus postgres, caf or nats: how often the cluster tail reads the events other nodes "
      "committed when no doorbell rang (the latency a lost doorbell costs; never an event)",
      "500"},
     number(&node_config::cluster_poll_ms)},
    {{"--cluster-doorbell", "WAGGLE_CLUSTER_DOORBELL",
      "on: the cluster tail reads as soon as another node rings; off: on its poll only (a "
      "metered bus; the tests that show revocations do not depend on doorbells)",
      "on"},
     on_off(&node_config::cluster_doorbell)},
    {{"--roster-routing", "WAGGLE_ROSTER_ROUTING",
      "with --bus postgres, caf or nats, on: a channel's roster snapshot (39002) is published by "
      "one owner node among the live ones, which coalesces every node's changes; off: by each "
      "node that changed it (the database fence orders them either way)",
      "on"},
     on_off(&node_config::roster_routing)},
    {{"--push-gate-cache", "WAGGLE_PUSH_GATE_CACHE",
      "on: batches skip the push gate for communities this node knows have no lease (several "
      "nodes keep it correct through the bus: docs/push.md); off: every batch runs it",
      "on"},
     on_off(&node_config::push_gate_cache)},
    {{"--metrics-allow", "WAGGLE_METRICS_ALLOW",
      "who may read /metrics: loopback, any, or a comma-separated list of IP addresses "
      "(others get 403)",
      "loopback"},
     [](node_config& cfg, const std::string& value) -> std::string {
       if (!gateway::parse_metrics_allow(value))
         return "not loopback, any, or a comma-separated list of IP addresses";
       cfg.metrics_allow = value;
       return {};
     }},
  };
  return all;
}

}  // namespace waggle
