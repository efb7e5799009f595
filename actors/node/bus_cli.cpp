#include "actors/node/bus_cli.hpp"
#include "actors/node/cli_args.hpp"

#include <openssl/rand.h>

#include <chrono>
#include <cstdlib>
#include <iostream>
#include <thread>

#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/scoped_actor.hpp>
#include <pqxx/connection>

#include "actors/bus/caf_bus.hpp"
#include "actors/bus/caf_bus_settings.hpp"
#include "actors/bus/nats_bus.hpp"
#include "actors/bus/pg_bus.hpp"
#include "actors/support/env.hpp"
#include "actors/support/log.hpp"
#include "db/bus_store.hpp"
#include "messages/proto/event.hpp"
#include "messages/register_types.hpp"

namespace waggle {

namespace {

int usage(const std::string& what) {
  if (!what.empty())
    std::cerr << "waggle bus: " << what << "\n";
  std::cerr << "usage:\n"
               "  waggle bus publish SUBJECT PAYLOAD [options]\n"
               "  waggle bus request SUBJECT PAYLOAD [--timeout-ms N] [options]\n"
               "options: --bus postgres|caf|nats (WAGGLE_BUS), --database-url URL "
               "(WAGGLE_DATABASE_URL),\n"
               "         --nats-url URL (WAGGLE_NATS_URL; with nats, instead of a database),\n"
               "         --node-id ID (default: cli-<random>), --wait-ms N (how long to ask "
               "again while\n"
               "         nobody responds; default 0, with caf 5000: its peers' interest "
               "comes after it starts)\n";
  return 2;
}


std::string from_env(const char* name, const char* fallback) {
  const char* v = std::getenv(name);
  return v && *v ? v : fallback;
}

std::string client_node_id() {
  unsigned char bytes[6];
  if (RAND_bytes(bytes, sizeof(bytes)) != 1)
    throw std::runtime_error("RAND_bytes failed");
  return "cli-" + proto::to_hex(bytes, sizeof(bytes));
}

}  // namespace

int run_bus_cli(std::vector<std::string> args) {
  if (args.empty() || args[0] == "--help" || args[0] == "-h")
    return usage("");
  auto verb = args.front();
  args.erase(args.begin());
  auto driver = take_flag(args, "--bus", from_env("WAGGLE_BUS", "postgres"));
  auto url = take_flag(args, "--database-url", from_env("WAGGLE_DATABASE_URL", ""));
  auto nats_url = take_flag(args, "--nats-url", from_env("WAGGLE_NATS_URL", "nats://127.0.0.1:4222"));
  auto node_id = take_flag(args, "--node-id", "");
  int64_t timeout_ms = 0, wait_ms = 0;
  try {
    timeout_ms = std::stoll(take_flag(args, "--timeout-ms", "5000"));
    wait_ms = std::stoll(take_flag(args, "--wait-ms", driver == "caf" ? "5000" : "0"));
  } catch (const std::exception&) {
    return usage("--timeout-ms and --wait-ms are numbers of milliseconds");
  }
  if ((verb != "publish" && verb != "request") || args.size() != 2)
    return usage("");
  if (driver != "postgres" && driver != "caf" && driver != "nats")
    return usage("--bus is postgres, caf or nats (an inproc bus has nobody else on it)");
  if (url.empty() && driver != "nats")
    return usage("no database: set WAGGLE_DATABASE_URL or --database-url");
  if (timeout_ms < 1 || timeout_ms > 600'000 || wait_ms < 0 || wait_ms > 600'000)
    return usage("--timeout-ms must be within 1..600000 and --wait-ms within 0..600000");
  if (node_id.empty())
    node_id = client_node_id();
  if (!bus_valid_node_id(node_id))
    return usage("--node-id must be 1-64 of [A-Za-z0-9_-]");

  // The driver's own warnings (a peer it cannot reach yet) are not the
  // answer; what failed is printed below.
  log::set_level(log::level::error);
  caf::actor_system_config cfg;
  register_types(cfg);
  cfg.set("logger.verbosity", caf::atom("quiet"));
  if (driver == "caf")
    configure_caf_bus(cfg, caf_bus_settings{}.protocol_version);
  caf::actor_system sys{cfg};
  auto env = node_env::production();
  bus_actor bus;
  if (driver == "postgres") {
    pg_bus_settings s;
    s.database_url = url;
    s.node_id = node_id;
    bus = sys.spawn(pg_bus_impl, s, env.for_actor("bus"));
  } else if (driver == "nats") {
    nats_bus_settings s;
    s.url = nats_url;
    s.node_id = node_id;
    auto spawned = spawn_nats_bus(sys, s, env);
    if (!spawned) {
      std::cerr << "waggle bus: the NATS bus did not start: " << sys.render(spawned.error())
                << "\n";
      return 1;
    }
    bus = *spawned;
  } else {
    caf_bus_settings s;
    s.database_url = url;
    s.node_id = node_id;
    auto spawned = spawn_caf_bus(sys, s, env.for_actor("bus"));
    if (!spawned) {
      std::cerr << "waggle bus: the CAF bus did not start: " << sys.render(spawned.error()) << "\n";
      return 1;
    }
    bus = *spawned;
  }

  int rc = 1;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(wait_ms);
  {
    caf::scoped_actor self{sys};
    // Beyond the request's own deadline: the bus answers request_timeout.
    auto bound = std::chrono::milliseconds(timeout_ms) + std::chrono::seconds(10);
    auto failed = [&](const caf::error& err) {
      std::cerr << "waggle bus " << verb << ": " << sys.render(err) << "\n";
      rc = 1;
    };
    for (bool again = true; again;) {
      again = false;
      if (verb == "publish") {
        self->request(bus, bound, bus_publish{args[0], args[1], {}})
          .receive(
            [&](bus_ack& ack) {
              std::cout << "published " << ack.id << "\n";
              rc = 0;
            },
            failed);
      } else {
        self->request(bus, bound, bus_request{args[0], args[1], static_cast<uint32_t>(timeout_ms)})
          .receive(
            [&](bus_message& reply) {
              std::cout << reply.payload << "\n";
              rc = 0;
            },
            [&](caf::error& err) {
              if (bus_error_is(err, bus_errc::no_responders) && std::chrono::steady_clock::now() < deadline) {
                std::this_thread::sleep_for(std::chrono::milliseconds(200));
                again = true;
              } else {
                failed(err);
              }
            });
      }
    }
  }
  caf::anon_send_exit(bus, caf::exit_reason::user_shutdown);
  sys.await_all_actors_done();
  // A client node leaves the registry at once rather than at its expiry
  // (peers and requests would count it live for 30 s). NATS keeps none.
  if (driver == "nats")
    return rc;
  try {
    pqxx::connection conn{url};
    db::bus::unregister_node(conn, node_id);
  } catch (const std::exception&) {
    // Not reachable now: the row expires by itself.
  }
  return rc;
}

}  // namespace waggle
