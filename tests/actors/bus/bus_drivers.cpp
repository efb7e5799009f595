// The drivers the conformance suite runs against (bus_harness.hpp).

#include <algorithm>
#include <stdexcept>
#include <thread>

#include "actors/bus/caf_bus.hpp"
#include "actors/bus/inproc_bus.hpp"
#include "actors/bus/nats_bus.hpp"
#include "actors/bus/pg_bus.hpp"
#include "messages/register_types.hpp"
#include "tests/actors/bus/bus_harness.hpp"
#include "tests/support/nats_server.hpp"
#include "tests/support/pg_fixture.hpp"

namespace waggle::testing {

namespace {

struct system_config : caf::actor_system_config {
  system_config() {
    register_types(*this);
    set("scheduler.max-threads", 2);
  }
};

node_env test_env(const std::string& actor, std::shared_ptr<metrics> stats = nullptr) {
  auto env = node_env::production();
  env.stats = stats ? std::move(stats) : std::make_shared<metrics>();
  return env.for_actor(actor);
}

class inproc_harness : public bus_harness {
 public:
  inproc_harness() : sys_(cfg_) { bus_ = sys_.spawn(inproc_bus_impl, test_env("bus", stats_)); }
  ~inproc_harness() override { caf::anon_send_exit(bus_, caf::exit_reason::user_shutdown); }
  size_t nodes() const override { return 1; }
  bus_actor bus(size_t) override { return bus_; }
  caf::actor_system& system(size_t) override { return sys_; }
  std::shared_ptr<metrics> stats(size_t) override { return stats_; }

 private:
  std::shared_ptr<metrics> stats_ = std::make_shared<metrics>();
  system_config cfg_;
  caf::actor_system sys_;
  bus_actor bus_;
};

// Two nodes on one database, each its own actor system (as two processes
// would be), with node ids of their own.
class pg_harness : public bus_harness {
 public:
  explicit pg_harness(const std::function<void(size_t, pg_bus_settings&)>& tweak)
    : db_("bus", pgtest::scratch_database::content::migrated) {
    for (size_t i = 0; i < 2; ++i) {
      auto& n = nodes_.emplace_back(std::make_unique<node>());
      pg_bus_settings settings;
      settings.database_url = db_.url();
      settings.node_id = "test-node-" + std::to_string(i);
      if (tweak)
        tweak(i, settings);
      n->bus = n->sys.spawn(pg_bus_impl, settings, test_env("bus", n->stats));
    }
  }
  ~pg_harness() override {
    for (auto& n : nodes_)
      caf::anon_send_exit(n->bus, caf::exit_reason::user_shutdown);
    nodes_.clear();  // each system waits for its actors before the database goes
  }
  size_t nodes() const override { return nodes_.size(); }
  bus_actor bus(size_t i) override { return nodes_.at(i)->bus; }
  caf::actor_system& system(size_t i) override { return nodes_.at(i)->sys; }
  std::string database_url() const override { return db_.url(); }
  std::shared_ptr<metrics> stats(size_t i) override { return nodes_.at(i)->stats; }

 private:
  struct node {
    std::shared_ptr<metrics> stats = std::make_shared<metrics>();
    system_config cfg;
    caf::actor_system sys{cfg};
    bus_actor bus;
  };
  pgtest::scratch_database db_;
  std::vector<std::unique_ptr<node>> nodes_;
};

class caf_harness : public bus_harness {
 public:
  caf_harness(size_t count, const std::function<void(size_t, caf_bus_settings&)>& tweak)
    : db_("bus", pgtest::scratch_database::content::migrated) {
    std::vector<int32_t> versions;
    for (size_t i = 0; i < count; ++i) {
      caf_bus_settings settings;
      settings.database_url = db_.url();
      settings.node_id = "caf-node-" + std::to_string(i);
      settings.refresh = std::chrono::milliseconds{100};
      settings.reconnect_max = std::chrono::milliseconds{500};
      if (tweak)
        tweak(i, settings);
      versions.push_back(settings.protocol_version);
      settings_.push_back(settings);
      nodes_.push_back(start(settings));
    }
    // Every node of the common version sees every other one.
    auto common = versions.empty() ? 1 : versions[0];
    int64_t peers = std::count(versions.begin(), versions.end(), common) - 1;
    for (int i = 0; i < 200; ++i) {
      bool all = true;
      for (size_t k = 0; k < nodes_.size(); ++k)
        if (versions[k] == common && nodes_[k]->stats->bus.peers.load() < peers)
          all = false;
      if (all)
        return;
      std::this_thread::sleep_for(std::chrono::milliseconds{50});
    }
    throw std::runtime_error("the CAF bus nodes did not connect within 10 s");
  }
  ~caf_harness() override {
    for (auto& n : nodes_)
      if (n)
        caf::anon_send_exit(n->bus, caf::exit_reason::user_shutdown);
    nodes_.clear();
  }
  size_t nodes() const override { return nodes_.size(); }
  bus_actor bus(size_t i) override { return nodes_.at(i)->bus; }
  caf::actor_system& system(size_t i) override { return nodes_.at(i)->sys; }
  std::string database_url() const override { return db_.url(); }
  std::shared_ptr<metrics> stats(size_t i) override { return nodes_.at(i)->stats; }
  void kill(size_t i) override {
    // Its system goes, and with it the middleman's sockets: to the peers, a
    // node that died.
    caf::anon_send_exit(nodes_.at(i)->bus, caf::exit_reason::kill);
    nodes_.at(i).reset();
  }
  void restart(size_t i) override {
    kill(i);
    nodes_.at(i) = start(settings_.at(i));
  }

 private:
  struct node {
    explicit node(int32_t version) : cfg(version) {}
    struct config : system_config {
      explicit config(int32_t version) { configure_caf_bus(*this, version); }
    };
    std::shared_ptr<metrics> stats = std::make_shared<metrics>();
    config cfg;
    caf::actor_system sys{cfg};
    caf_bus_actor bus;
  };
  std::unique_ptr<node> start(const caf_bus_settings& settings) {
    auto n = std::make_unique<node>(settings.protocol_version);
    auto bus = spawn_caf_bus(n->sys, settings, test_env("bus", n->stats));
    if (!bus)
      throw std::runtime_error(n->sys.render(bus.error()));
    n->bus = *bus;
    return n;
  }

  pgtest::scratch_database db_;
  std::vector<caf_bus_settings> settings_;
  std::vector<std::unique_ptr<node>> nodes_;
};

// Two nodes on one nats-server (started for the harness unless given),
// each its own actor system and connection, as two processes would be.
class nats_harness : public bus_harness {
 public:
  nats_harness(std::shared_ptr<nats_test_server> server,
               const std::function<void(size_t, nats_bus_settings&)>& tweak)
    : server_(server ? std::move(server) : std::make_shared<nats_test_server>()) {
    for (size_t i = 0; i < 2; ++i) {
      auto& n = nodes_.emplace_back(std::make_unique<node>());
      nats_bus_settings settings;
      settings.url = server_->url();
      settings.node_id = "nats-node-" + std::to_string(i);
      settings.reconnect_min = std::chrono::milliseconds{20};
      settings.reconnect_max = std::chrono::milliseconds{200};
      if (tweak)
        tweak(i, settings);
      auto bus = spawn_nats_bus(n->sys, settings, test_env("bus", n->stats));
      if (!bus)
        throw std::runtime_error("the NATS bus did not start: " + n->sys.render(bus.error()));
      n->bus = *bus;
    }
  }
  ~nats_harness() override {
    for (auto& n : nodes_)
      caf::anon_send_exit(n->bus, caf::exit_reason::user_shutdown);
    nodes_.clear();
  }
  size_t nodes() const override { return nodes_.size(); }
  bus_actor bus(size_t i) override { return nodes_.at(i)->bus; }
  caf::actor_system& system(size_t i) override { return nodes_.at(i)->sys; }
  std::shared_ptr<metrics> stats(size_t i) override { return nodes_.at(i)->stats; }

 private:
  struct node {
    std::shared_ptr<metrics> stats = std::make_shared<metrics>();
    system_config cfg;
    caf::actor_system sys{cfg};
    nats_bus_actor bus;
  };
  std::shared_ptr<nats_test_server> server_;
  std::vector<std::unique_ptr<node>> nodes_;
};

}  // namespace

std::unique_ptr<bus_harness> make_nats_bus_harness(
  std::shared_ptr<nats_test_server> server, std::function<void(size_t, nats_bus_settings&)> tweak) {
  return std::make_unique<nats_harness>(std::move(server), tweak);
}

std::unique_ptr<bus_harness> make_caf_bus_harness(
  size_t nodes, std::function<void(size_t, caf_bus_settings&)> tweak) {
  return std::make_unique<caf_harness>(nodes, tweak);
}

std::unique_ptr<bus_harness> make_pg_bus_harness(
  std::function<void(size_t, pg_bus_settings&)> tweak) {
  return std::make_unique<pg_harness>(tweak);
}

std::unique_ptr<bus_harness> make_bus_harness(const std::string& driver) {
  if (driver == "inproc")
    return std::make_unique<inproc_harness>();
  if (driver == "postgres")
    return make_pg_bus_harness();
  if (driver == "caf")
    return make_caf_bus_harness(2);
  if (driver == "nats")
    return make_nats_bus_harness();
  throw std::invalid_argument("no bus driver " + driver);
}

}  // namespace waggle::testing
