// waggle: a Nostr relay for team chat.
//
//   waggle serve [options]           run a relay node (see --help)
//   waggle migrate                   apply database migrations
//   waggle community add HOST [--name NAME] [--policy closed|open|invite]
//   waggle community list
//   waggle community member|admin|policy ... (actors/node/community_cli.hpp)
//   waggle bus publish|request SUBJECT PAYLOAD (actors/node/bus_cli.hpp)
//   waggle export|import ... (actors/node/portability_cli.hpp)
//   waggle sync URL ... (actors/node/sync_cli.hpp)

#include <sys/resource.h>

#include <csignal>
#include <cstdio>
#include <iostream>
#include <string>
#include <vector>

#include <pqxx/connection>

#include "actors/node/bus_cli.hpp"
#include "actors/node/cli_args.hpp"
#include "actors/node/community_cli.hpp"
#include "actors/node/sync_cli.hpp"
#include "actors/node/config.hpp"
#include "actors/node/config_file.hpp"
#include "actors/support/log.hpp"
#include "actors/node/node.hpp"
#include "actors/node/portability_cli.hpp"
#include "actors/trace/trace_recorder.hpp"
#include "actors/replay/trace_replay.hpp"
#include "db/community_store.hpp"
#include "db/migrate.hpp"
#include "db/statistics.hpp"
#include "gateway/server.hpp"

using namespace waggle;

namespace {

int usage() {
  std::cerr << "usage:\n"
               "  waggle serve [options]              run a relay node (waggle serve --help)\n"
               "  waggle migrate [--database-url URL] apply database migrations\n"
               "  waggle community add HOST [--name NAME] [--policy closed|open|invite] [--database-url URL]\n"
               "  waggle community list [--database-url URL]\n"
               "  waggle community member add HOST PUBKEY [--role owner|admin|member]\n"
               "  waggle community member remove|list ...; admin add|remove|list ...;\n"
               "  waggle community policy HOST [open|closed|invite]\n"
               "  waggle export [--community HOST] [--since TS] [--until TS]  events as JSON lines on stdout\n"
               "  waggle import FILE|- --community HOST [--batch N]  load JSON lines (docs/portability.md)\n"               "  waggle sync URL [--filter JSON] [--dir down|up|both]  NIP-77 sync with another relay\n"
               "                                      (waggle sync --help; docs/negentropy.md)\n"
               "  waggle replay [--strict] TRACE      replay a recorded actor trace (docs/traces.md)\n"
               "  waggle bus publish SUBJECT PAYLOAD  publish on the cluster's bus (waggle bus --help)\n"
               "  waggle bus request SUBJECT PAYLOAD [--timeout-ms N]  ask and print the reply\n";
  return 2;
}


std::string database_url(std::vector<std::string>& args) {
  const char* env = std::getenv("WAGGLE_DATABASE_URL");
  auto url = take_flag(args, "--database-url", env ? env : "");
  if (url.empty())
    throw std::runtime_error("no database: set WAGGLE_DATABASE_URL or --database-url");
  return url;
}

int run_migrate(std::vector<std::string> args) {
  pqxx::connection conn{database_url(args)};
  auto applied = db::apply_migrations(conn, db::embedded_migrations());
  if (!applied) {
    std::cerr << "waggle migrate: " << applied.error().reason << "\n";
    return 1;
  }
  std::cout << "migrations applied: " << *applied << " new, "
            << db::embedded_migrations().size() << " known\n";
  for (const auto& table : db::analyze_missing_statistics(conn))
    std::cout << "analyzed " << table << " (it had rows and no statistics)\n";
  return 0;
}

int run_community(std::vector<std::string> args) {
  if (args.empty())
    return usage();
  auto verb = args.front();
  args.erase(args.begin());
  auto url = database_url(args);
  if (verb == "member" || verb == "admin" || verb == "policy")
    return run_community_admin(verb, std::move(args), url);
  auto name = take_flag(args, "--name", "");
  auto policy_text = take_flag(args, "--policy", "closed");
  auto policy = parse_community_policy(policy_text);
  if (!policy) {
    std::cerr << "waggle community: --policy is open, closed or invite\n";
    return 2;
  }
  pqxx::connection conn{url};
  if (verb == "add" && args.size() == 1) {
    auto added = db::add_community(conn, args[0], name, *policy);
    if (!added) {
      std::cerr << "waggle community add: " << added.error().reason << "\n";
      return 1;
    }
    std::cout << "community " << added->id << " host " << added->host << " policy "
              << name_of(added->policy) << "\n";
    return 0;
  }
  if (verb == "list" && args.empty()) {
    for (auto& c : db::load_communities(conn))
      std::cout << c.id << '\t' << c.host << '\t' << name_of(c.policy) << '\t' << c.name
                << (c.archived ? "\tarchived" : "") << '\n';
    return 0;
  }
  return usage();
}

// Each WebSocket is a descriptor: a soft limit of 1024 (a common default)
// would refuse connections long before --max-connections.
void raise_fd_limit(size_t wanted) {
  rlimit lim{};
  if (getrlimit(RLIMIT_NOFILE, &lim) != 0 || lim.rlim_cur >= wanted)
    return;
  lim.rlim_cur = std::min<rlim_t>(lim.rlim_max, static_cast<rlim_t>(wanted));
  if (setrlimit(RLIMIT_NOFILE, &lim) == 0 && lim.rlim_cur < wanted)
    log::warn("node", "open-file limit below --max-connections",
              {{"limit", std::to_string(lim.rlim_cur)}});
}

// `waggle replay <file>`: replays a recorded trace through the node's actors
// (no database needed) and prints "identical" or the first divergence.
int run_replay(std::vector<std::string> args) {
  replay_options options;
  if (!args.empty() && args[0] == "--strict") {
    options.strict = true;
    args.erase(args.begin());
  }
  if (args.size() != 1 || args[0] == "--help" || args[0] == "-h") {
    std::cerr << "usage: waggle replay [--strict] <trace.jsonl>\n"
                 "Replays a trace recorded with WAGGLE_TRACE (docs/traces.md). --strict also "
                 "requires each frame and reading\nto be made by the last input before it (a "
                 "trace of one client at a time). Exit 0: identical; 1: diverged;\n2: the "
                 "trace cannot be replayed.\n";
    return 2;
  }
  // The replayed actors log what the live node did back then (a delivery's
  // "will retry"); only their warnings say something about the replay.
  log::set_level(log::level::warn);
  auto out = replay_trace_file(args[0], options);
  std::cout << out.summary() << "\n";
  if (!out.error.empty())
    return 2;
  return out.identical ? 0 : 1;
}

// A restored or upgraded database gets its statistics before the writer
// sessions' first batches make their generic plans; after start_checks, so
// the database is known to be reachable. Best effort: a failure is logged and
// autovacuum will get there.
void analyze_restored_tables(const std::string& database_url) {
  try {
    pqxx::connection conn{database_url};
    for (const auto& table : db::analyze_missing_statistics(conn))
      log::info("node", "analyzed a table that had rows and no statistics", {{"table", table}});
  } catch (const std::exception& e) {
    log::warn("node", "could not check planner statistics", {{"error", e.what()}});
  }
}

int run_serve(std::vector<std::string> args) {
  for (auto& a : args)
    if (a == "--help" || a == "-h") {
      std::cout << serve_usage();
      return 0;
    } else if (a == "--print-config-example") {
      std::cout << config_example();
      return 0;
    }
  node_config cfg;
  if (auto st = parse_serve_config(cfg, args); !st.ok()) {
    std::cerr << "waggle serve: " << st.reason << "\n\n" << serve_usage();
    return 2;
  }
  if (cfg.database_url.empty()) {
    std::cerr << "waggle serve: no database: set WAGGLE_DATABASE_URL, --database-url or, "
                 "in the --config file, database-url\n";
    return 2;
  }
  log::set_level(log::parse_level(cfg.log_level));
  // The gateway holds up to max_connections * 1.1 + 64 TCP connections plus
  // its health reserve (server_state::max_tcp); room for the rest above that.
  raise_fd_limit(cfg.max_connections + cfg.max_connections / 10 + cfg.health_reserve + 1024);

  // Signals are taken synchronously by this thread; block them everywhere
  // before any other thread starts so that none of them takes the signal.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  std::signal(SIGPIPE, SIG_IGN);

  auto env = node_env::production();
  std::shared_ptr<trace_recorder> recorder;
  if (!cfg.trace_file.empty()) {
    recorder = std::make_shared<trace_recorder>(cfg.trace_file, cfg.trace_sample);
    env.trace = recorder;
  }
  node relay{cfg, env};
  if (auto st = relay.start_checks(); !st.ok()) {
    log::error("node", "refusing to start", {{"reason", st.reason}});
    std::cerr << "waggle serve: refusing to start: " << st.reason << "\n";
    relay.stop();
    return 3;
  }
  analyze_restored_tables(cfg.database_url);
  if (recorder) {
    recorder->start(trace_node_json(cfg, relay.relay_pubkey(), relay.node_id()));
    log::info("node", "recording a trace",
              {{"file", cfg.trace_file}, {"sample", std::to_string(cfg.trace_sample)}});
  }
  // After the recorder started: a trace holds delivery from its first claim.
  relay.start_delivery();
  relay.start_bus_probe();
  gateway::server_limits limits;
  limits.max_frame_bytes = cfg.max_frame_bytes;
  limits.max_connections = cfg.max_connections;
  limits.max_outbound_frames = cfg.max_outbound_frames;
  limits.ping_interval = std::chrono::seconds(cfg.ping_seconds);
  limits.max_connections_per_ip = cfg.max_connections_per_ip;
  limits.new_connections_per_second = cfg.new_connections_per_second;
  limits.new_connections_burst = cfg.new_connections_burst;
  limits.ipv6_prefix = cfg.ipv6_prefix;
  limits.trusted_proxies = cfg.trusted_proxies;
  limits.auth_deadline = std::chrono::seconds(cfg.auth_deadline_seconds);
  limits.max_unauthenticated = cfg.max_unauthenticated;
  limits.health_reserve = cfg.health_reserve;
  limits.max_outbound_bytes_total = cfg.max_outbound_bytes_total;
  limits.socket_send_buffer = cfg.socket_send_buffer;
  limits.write_stall = std::chrono::seconds(cfg.write_stall_seconds);
  limits.metrics_allow = *gateway::parse_metrics_allow(cfg.metrics_allow);  // checked by parse
  gateway::server server{relay.api(), limits, cfg.bind, cfg.port, cfg.io_threads};
  auto port = server.start();
  log::info("node", "listening",
            {{"url", "ws://" + cfg.bind + ":" + std::to_string(port)},
             {"relay_pubkey", relay.relay_pubkey()}});

  int sig = 0;
  sigwait(&signals, &sig);
  log::info("node", "draining", {{"signal", sig == SIGTERM ? "SIGTERM" : "SIGINT"}});
  auto bound = std::chrono::seconds(cfg.drain_seconds);
  auto started = std::chrono::steady_clock::now();
  server.stop_accepting();
  relay.drain(std::chrono::duration_cast<std::chrono::milliseconds>(bound) * 3 / 4);
  auto left = bound - std::chrono::duration_cast<std::chrono::seconds>(
                        std::chrono::steady_clock::now() - started);
  server.shutdown(std::max<std::chrono::seconds>(left, std::chrono::seconds(1)));
  relay.stop();
  if (recorder)
    recorder->flush();
  log::info("node", "stopped");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  if (args.empty())
    return usage();
  auto cmd = args.front();
  args.erase(args.begin());
  try {
    if (cmd == "serve")
      return run_serve(std::move(args));
    if (cmd == "migrate")
      return run_migrate(std::move(args));
    if (cmd == "community")
      return run_community(std::move(args));
    if (cmd == "replay")
      return run_replay(std::move(args));
    if (cmd == "bus")
      return run_bus_cli(std::move(args));
    if (cmd == "export")
      return run_export(std::move(args));
    if (cmd == "import")
      return run_import(std::move(args));
    if (cmd == "sync") {
      if (!args.empty() && (args[0] == "--help" || args[0] == "-h"))
        return run_sync({}, "");
      auto url = database_url(args);
      return run_sync(std::move(args), url);
    }
    if (cmd == "--help" || cmd == "-h" || cmd == "help") {
      usage();
      return 0;
    }
  } catch (const std::exception& e) {
    std::cerr << "waggle " << cmd << ": " << e.what() << "\n";
    return 1;
  }
  return usage();
}
