#include "actors/node/config.hpp"

#include <cctype>
#include <cstdlib>
#include <map>
#include <optional>
#include <sstream>
#include <string_view>
#include <utility>

#include <sys/stat.h>
#include <unistd.h>

#include "actors/bus/caf_bus_settings.hpp"
#include "actors/node/config_file.hpp"
#include "actors/node/config_options.hpp"
#include "gateway/http_client.hpp"
#include "messages/proto/text.hpp"

namespace waggle {

const std::vector<option_doc>& serve_options() {
  static const std::vector<option_doc> docs = [] {
    std::vector<option_doc> out;
    for (auto& o : serve_option_table())
      out.push_back(o.doc);
    return out;
  }();
  return docs;
}

env_map serve_environment() {
  env_map env;
  for (auto& o : serve_option_table())
    if (const char* value = std::getenv(o.doc.env.c_str()); value && *value)
      env.emplace(o.doc.env, value);
  return env;
}

status parse_serve_config(node_config& cfg, const std::vector<std::string>& args) {
  return parse_serve_config(cfg, args, serve_environment());
}

namespace {

const serve_option* find_option(std::string_view key) {
  for (auto& o : serve_option_table())
    if (config_key(o.doc) == key)
      return &o;
  return nullptr;
}

const serve_option* find_flag(std::string_view flag) {
  return flag.starts_with("--") ? find_option(flag.substr(2)) : nullptr;
}

// Whether `message` names the option `key` as a word of its own (not as the
// start of a longer key: max-subscription-bytes in max-subscription-bytes-total).
bool names(std::string_view message, std::string_view key) {
  auto part_of_key = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '-'; };
  for (auto at = message.find(key); at != std::string_view::npos; at = message.find(key, at + 1)) {
    bool starts = at == 0 || !part_of_key(message[at - 1])
                  || (at >= 2 && message.substr(at - 2, 2) == "--");
    auto after = at + key.size();
    if (starts && (after == message.size() || !part_of_key(message[after])))
      return true;
  }
  return false;
}

// The cross-field checks and derived defaults, once every source is in.
status check_serve_config(node_config& cfg);

}  // namespace

status parse_serve_config(node_config& cfg, const std::vector<std::string>& args,
                          const env_map& env) {
  // The flags are split first, as they will be applied: the file they name is
  // read before the environment, and a value that happens to be "--config"
  // (--relay-name --config) is a value.
  std::vector<std::pair<const serve_option*, std::string>> flags;
  std::optional<std::string> config_path;
  for (size_t i = 0; i < args.size(); ++i) {
    std::string flag = args[i];
    std::string value;
    if (auto eq = flag.find('='); eq != std::string::npos) {
      value = flag.substr(eq + 1);
      flag.resize(eq);
    } else if (i + 1 < args.size()) {
      value = args[++i];
    } else {
      return {ec::invalid, "missing value for " + flag};
    }
    if (flag == "--config") {
      if (config_path)
        return {ec::invalid, "--config given twice"};
      config_path = value;
      continue;
    }
    auto* o = find_flag(flag);
    if (!o)
      return {ec::invalid, "unknown option " + flag};
    flags.emplace_back(o, value);
  }

  // Where the file set each option it set (key -> "FILE:LINE") until a flag or
  // a variable overrides it: the cross-field checks name no source, and a
  // value they refuse must be findable.
  std::map<std::string, std::string> from_file;
  if (config_path) {
    std::vector<config_line> lines;
    if (auto st = read_config_file(*config_path, lines); !st.ok())
      return st;
    for (auto& line : lines) {
      if (auto why = find_option(line.key)->set(cfg, line.value); !why.empty())
        return {ec::invalid, config_line_error(*config_path, line, why + ": \"" + line.value + "\"")};
      from_file[line.key] = *config_path + ":" + std::to_string(line.number);
    }
  }
  for (auto& o : serve_option_table())
    if (auto it = env.find(o.doc.env); it != env.end() && !it->second.empty()) {
      if (!o.set(cfg, it->second).empty())
        return {ec::invalid, "bad value for " + o.doc.env + ": " + it->second};
      from_file.erase(config_key(o.doc));
    }
  // A repeatable flag's values so far: each new one extends them, and the
  // whole replaces what the environment or the file said.
  std::map<const serve_option*, std::string> repeated;
  for (auto& [o, value] : flags) {
    std::string text = value;
    if (o->repeatable) {
      auto& joined = repeated[o];
      joined += (joined.empty() ? "" : " ") + value;
      text = joined;
    }
    if (!o->set(cfg, text).empty())
      return {ec::invalid, "bad value for " + o->doc.flag + ": " + value};
    from_file.erase(config_key(o->doc));
  }

  auto st = check_serve_config(cfg);
  if (!st.ok()) {
    std::string where;
    for (auto& [key, line] : from_file)
      if (names(st.reason, key))
        where += (where.empty() ? "" : ", ") + key + " from " + line;
    if (!where.empty())
      st.reason += " (" + where + ")";
  }
  return st;
}

namespace {

status check_serve_config(node_config& cfg) {
  if (cfg.relay_key_file.empty())
    cfg.relay_key_file = cfg.data_dir + "/relay.key";
  if (cfg.max_auth_keys == 0)
    return {ec::invalid, "max-auth-keys must be at least 1"};
  if (cfg.writers == 0 || cfg.readers == 0 || cfg.max_batch == 0)
    return {ec::invalid, "writers, readers and max-batch must be at least 1"};
  if (cfg.group_sessions == 0 || cfg.max_group_queue_per_community == 0)
    return {ec::invalid, "group-sessions and max-group-queue-per-community must be at least 1"};
  if (cfg.roster_idle_seconds < 0)
    return {ec::invalid, "roster-idle-seconds must not be negative"};
  // Below a /16 one bucket would stand for a large share of the Internet.
  if (cfg.ipv6_prefix < 16 || cfg.ipv6_prefix > 128)
    return {ec::invalid, "ipv6-prefix must be within 16..128"};
  if (cfg.history_stall_seconds < 0)
    return {ec::invalid, "history-stall-seconds must not be negative"};
  if (cfg.commit_delay_us < 0 || cfg.commit_delay_us > 100'000)
    return {ec::invalid, "commit-delay-us must be within 0..100000"};
  if (cfg.commit_siblings < 2 || cfg.commit_siblings > 32)
    return {ec::invalid, "commit-siblings must be within 2..32"};
  if (cfg.max_reads_in_flight == 0 || cfg.read_timeout_ms <= 0 || cfg.read_statement_timeout_ms < 0
      || cfg.read_rate_connection < 0 || cfg.read_burst_connection < 0 || cfg.read_rate_pubkey < 0
      || cfg.read_burst_pubkey < 0 || cfg.read_rate_address < 0 || cfg.read_burst_address < 0)
    return {ec::invalid, "max-reads-in-flight and read-timeout-ms must be at least 1, the other "
                         "read limits at least 0"};
  if (cfg.refusal_rate < 0 || cfg.refusal_burst < 0 || cfg.refusal_max_pause_ms < 0)
    return {ec::invalid, "refusal-rate, refusal-burst and refusal-max-pause-ms must be at least 0"};
  // A query must end in the database before its caller stops waiting for
  // it, or it runs on for nobody.
  if (cfg.read_statement_timeout_ms == 0 || cfg.read_statement_timeout_ms >= cfg.read_timeout_ms)
    return {ec::invalid, "read-statement-timeout-ms must be at least 1 and below read-timeout-ms"};
  if (cfg.replica_pool_size == 0 || cfg.replica_pool_size > 1000
      || cfg.replica_acquire_budget_ms < 1 || cfg.replica_acquire_budget_ms > 10'000
      || cfg.replica_read_max_age_ms < 0 || cfg.replica_reserved_connections < -1
      || cfg.heartbeat_interval_ms < 10
      || cfg.heartbeat_interval_ms > 60'000 || cfg.heartbeat_stale_ms <= cfg.heartbeat_interval_ms)
    return {ec::invalid, "replica-pool-size must be within 1..1000, replica-acquire-budget-ms "
                         "within 1..10000, replica-read-max-age-ms at least 0, "
                         "replica-reserved-connections at least -1, heartbeat-interval-ms within 10..60000 and heartbeat-stale-ms above it"};
  if (cfg.bus != "inproc" && cfg.bus != "postgres" && cfg.bus != "caf" && cfg.bus != "nats")
    return {ec::invalid, "bus must be inproc, postgres, caf or nats"};
  if (cfg.bus == "nats" && cfg.nats_url.empty())
    return {ec::invalid, "nats-url must name the NATS server of --bus nats"};
  if (!cfg.node_id.empty() && !bus_valid_node_id(cfg.node_id))
    return {ec::invalid, "node-id must be 1-64 of [A-Za-z0-9_-]"};
  if (cfg.bus_probe_ms < 100 || cfg.bus_probe_ms > 3'600'000)
    return {ec::invalid, "bus-probe-ms must be within 100..3600000"};
  if (cfg.cluster_poll_ms < 10 || cfg.cluster_poll_ms > 60'000)
    return {ec::invalid, "cluster-poll-ms must be within 10..60000"};
  if (cfg.write_policy_fail != "closed" && cfg.write_policy_fail != "open")
    return {ec::invalid, "write-policy-fail must be closed or open"};
  if (cfg.write_policy_queue == 0 || cfg.write_policy_timeout_ms <= 0
      || cfg.write_policy_timeout_ms > 600'000)
    return {ec::invalid, "write-policy-queue must be at least 1 and write-policy-timeout-ms "
                         "within 1..600000"};
  if (auto st = parse_operator_listeners(cfg.operator_listeners_text, cfg.operator_listeners); !st.ok())
    return st;
  if (cfg.delivery_slots == 0 || cfg.delivery_slots > 1000)
    return {ec::invalid, "delivery-slots must be within 1..1000"};
  if (cfg.delivery_per_listener == 0 || cfg.delivery_per_listener > cfg.delivery_slots)
    return {ec::invalid, "delivery-per-listener must be within 1..delivery-slots"};
  if (cfg.delivery_timeout_ms <= 0 || cfg.delivery_timeout_ms > 60'000)
    return {ec::invalid, "delivery-timeout-ms must be within 1..60000"};
  if (!cfg.push_gateway_url.empty() && cfg.push_gateway_url.rfind("http://", 0) != 0
      && cfg.push_gateway_url.rfind("https://", 0) != 0)
    return {ec::invalid, "push-gateway-url must be an http(s) URL"};
  if (cfg.push_slots == 0 || cfg.push_slots > 1000 || cfg.push_lease_quota == 0
      || cfg.push_lease_quota > 1000)
    return {ec::invalid, "push-slots and push-lease-quota must be within 1..1000"};
  if (cfg.push_backfill_seconds < 0 || cfg.push_backfill_seconds > 3600
      || cfg.push_match_interval_ms < 0 || cfg.push_match_interval_ms > 10'000
      || cfg.push_completion_delay_ms < 0 || cfg.push_completion_delay_ms > 10'000)
    return {ec::invalid, "push-backfill-seconds must be within 0..3600, push-match-interval-ms "
                         "and push-completion-delay-ms within 0..10000"};
  if (cfg.listener_probe_ms <= 0 || cfg.listener_probe_timeout_ms <= 0)
    return {ec::invalid, "listener-probe-ms and listener-probe-timeout-ms must be at least 1"};
  if (!cfg.write_policy.empty()) {
    struct stat sb {};
    if (::stat(cfg.write_policy.c_str(), &sb) != 0 || !S_ISREG(sb.st_mode)
        || ::access(cfg.write_policy.c_str(), X_OK) != 0)
      return {ec::invalid, "write-policy is not an executable file: " + cfg.write_policy};
  }
  return {};
}

}  // namespace

status parse_operator_listeners(std::string_view text, std::map<std::string, std::string>& out) {
  out.clear();
  size_t position = 0;
  while (!text.empty()) {
    auto comma = text.find(',');
    auto entry = proto::trim(text.substr(0, comma));
    text = comma == std::string_view::npos ? std::string_view{} : text.substr(comma + 1);
    ++position;
    if (entry.empty())
      continue;
    auto bad = [&](const std::string& why) {
      return status{ec::invalid, "bad --operator-listeners entry " + std::to_string(position)
                                   + " \"" + std::string(entry) + "\": " + why};
    };
    auto eq = entry.find('=');
    if (eq == std::string_view::npos)
      return bad("expected <listener hex pubkey>=<url>");
    auto key = proto::trim(entry.substr(0, eq));
    auto url = proto::trim(entry.substr(eq + 1));
    if (key.size() != 64 || key.find_first_not_of("0123456789abcdef") != std::string_view::npos)
      return bad("the key is not 64 lowercase hex characters");
    if (!gateway::parse_http_url(url))
      return bad("the URL is not an http:// or https:// URL with a host");
    if (!out.emplace(std::string(key), std::string(url)).second)
      return bad("this listener key is listed twice");
  }
  return {};
}

std::string serve_usage() {
  std::ostringstream out;
  out << "usage: waggle serve [--config FILE] [options]\n\n"
         "Every option can also be set by its environment variable, or in FILE as\n"
         "`key = value`, the key being the flag without its --. A flag wins over its\n"
         "variable, and both over the file (docs/operations.md, \"Configuration file\").\n\n"
         "  --config FILE           read options from FILE\n"
         "  --print-config-example  print every option as a commented FILE, and exit\n"
         "                          (docs/waggle.conf.example)\n\n";
  for (auto& o : serve_options()) {
    out << "  " << o.flag;
    out << std::string(o.flag.size() < 24 ? 24 - o.flag.size() : 1, ' ');
    out << o.help;
    if (!o.default_value.empty())
      out << " (default " << o.default_value << ")";
    out << "\n" << std::string(26, ' ') << "env " << o.env << "\n";
  }
  return out.str();
}

}  // namespace waggle
