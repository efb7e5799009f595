#pragma once

// Three nodes over one scratch database, each with its own actor system,
// bus and WebSocket server, as three processes would have (docs/scaling.md);
// shared by the cluster end-to-end suites.

#include <atomic>
#include <filesystem>
#include <functional>
#include <map>
#include <set>
#include <thread>

#include <pqxx/transaction>

#include "tests/e2e/node_fixture.hpp"
#include "tests/support/nats_server.hpp"

namespace waggle::e2e {

struct cluster_node {
  std::unique_ptr<node> relay;
  std::unique_ptr<gateway::server> server;
  uint16_t port = 0;
};

class ClusterE2E : public ::testing::TestWithParam<std::string> {
 protected:
  static constexpr int nodes = 3;

  void SetUp() override {
    ASSERT_FALSE(pgtest::admin_url().empty()) << "WAGGLE_TEST_DATABASE_URL is not set";
    db_ = std::make_unique<pgtest::scratch_database>("cluster",
                                                     pgtest::scratch_database::content::migrated);
    {
      auto conn = db_->connect();
      ASSERT_TRUE(db::add_community(*conn, "alpha.test", "Alpha", community_policy::open)
                    .has_value());
    }
    if (GetParam() == "nats")
      nats_ = std::make_unique<testing::nats_test_server>();
    key_dir_ = std::filesystem::temp_directory_path() /
               ("waggle-cluster-" + std::to_string(getpid()));
    std::filesystem::create_directories(key_dir_);
    for (int i = 0; i < nodes; ++i) {
      node_config cfg;
      cfg.database_url = db_->url();
      cfg.port = 0;
      cfg.bus = GetParam();
      cfg.node_id = "cluster-" + std::to_string(i);
      // One relay key for the cluster (they sign the same channels' state).
      cfg.relay_key_file = (key_dir_ / "relay.key").string();
      cfg.operator_pubkeys = {proto::pubkey_of(pgtest::secret(60))};
      if (nats_)
        cfg.nats_url = nats_->url();
      if (configure_)
        configure_(i, cfg);
      auto& n = nodes_.emplace_back();
      n.relay = std::make_unique<node>(cfg, node_env::production());
      gateway::server_limits limits;
      limits.max_connections_per_ip = 0;
      limits.new_connections_per_second = 0;
      n.server = std::make_unique<gateway::server>(n.relay->api(), limits, "127.0.0.1", 0, 1);
      n.port = n.server->start();
      for (int t = 0; t < 200 && !n.relay->ready(); ++t)
        std::this_thread::sleep_for(50ms);
      ASSERT_TRUE(n.relay->ready());
      auto checked = n.relay->start_checks();
      ASSERT_TRUE(checked.ok()) << checked.reason;
      n.relay->start_delivery();  // as main() does once the node serves
    }
  }

  void TearDown() override {
    for (auto& n : nodes_)
      n.server->shutdown(std::chrono::seconds(2));
    nodes_.clear();
    nats_.reset();
    db_.reset();
    std::filesystem::remove_all(key_dir_);
  }

  std::unique_ptr<gateway::ws_client> login(int i, const std::string& sk) {
    auto c = std::make_unique<gateway::ws_client>();
    EXPECT_TRUE(c->connect("127.0.0.1", nodes_[i].port, "alpha.test")) << c->error();
    auto challenge = c->read_text(5s);
    EXPECT_TRUE(challenge.has_value());
    auto d = parse(*challenge);
    auto auth = signed_event(sk, 22242, "",
                             {{"relay", "ws://alpha.test/"}, {"challenge", d[1].GetString()}});
    c->send_text("[\"AUTH\"," + auth.raw + "]");
    auto ok = c->read_text(5s);
    EXPECT_TRUE(ok && ok->find(",true,") != std::string::npos) << ok.value_or("(none)");
    return c;
  }

  // Sends `ev` and returns its OK frame.
  static std::string command_ok(gateway::ws_client& c, const proto::event& ev) {
    c.send_text("[\"EVENT\"," + ev.raw + "]");
    while (auto f = c.read_text(10s))
      if (f->rfind("[\"OK\",\"" + ev.id, 0) == 0)
        return *f;
    return "(no OK)";
  }

  // Subscribes `c` to `filter` and waits for its EOSE.
  static void subscribe(gateway::ws_client& c, const std::string& filter) {
    c.send_text("[\"REQ\",\"live\"," + filter + "]");
    while (auto f = c.read_text(10s))
      if (f->rfind("[\"EOSE\"", 0) == 0)
        return;
    ADD_FAILURE() << "no EOSE";
  }

  // Reads live events until `want` distinct ids came or `quiet` passed
  // without a frame; counts every id (a duplicate counts twice).
  static std::map<std::string, int> collect(gateway::ws_client& c, size_t want,
                                            std::chrono::milliseconds quiet) {
    std::map<std::string, int> seen;
    while (seen.size() < want) {
      auto f = c.read_text(quiet);
      if (!f)
        break;
      auto d = parse(*f);
      if (d.IsArray() && d.Size() == 3 && std::string(d[0].GetString()) == "EVENT")
        ++seen[d[2]["id"].GetString()];
    }
    // Anything more that is already on its way (a duplicate would be).
    while (auto f = c.read_text(300ms)) {
      auto d = parse(*f);
      if (d.IsArray() && d.Size() == 3 && std::string(d[0].GetString()) == "EVENT")
        ++seen[d[2]["id"].GetString()];
    }
    return seen;
  }

  // Until an ephemeral probe from every node reached every other node's
  // subscriber: the bus links are up and the relays subscribed (CAF nodes
  // find each other through the registry within a few seconds; ephemeral
  // events sent before are lost, as at most once allows). Probes are kind
  // 20002, which the measured subscriptions do not ask for.
  void wait_until_linked() {
    std::vector<std::unique_ptr<gateway::ws_client>> watchers, senders;
    for (int i = 0; i < nodes; ++i) {
      watchers.push_back(login(i, pgtest::secret(40 + i)));
      subscribe(*watchers.back(), R"({"kinds":[20002]})");
      senders.push_back(login(i, pgtest::secret(50 + i)));
    }
    std::set<std::pair<int, int>> heard;  // (from, at)
    auto deadline = std::chrono::steady_clock::now() + 20s;
    int n = 0;
    while (heard.size() < size_t(nodes * (nodes - 1)) && std::chrono::steady_clock::now() < deadline) {
      for (int i = 0; i < nodes; ++i) {
        auto probe = signed_event(pgtest::secret(50 + i), 20002,
                                  std::to_string(i) + " " + std::to_string(n++));
        senders[i]->send_text("[\"EVENT\"," + probe.raw + "]");
      }
      for (int at = 0; at < nodes; ++at)
        while (auto f = watchers[at]->read_text(100ms)) {
          auto d = parse(*f);
          if (d.IsArray() && d.Size() == 3 && std::string(d[0].GetString()) == "EVENT") {
            int from = std::atoi(d[2]["content"].GetString());
            if (from != at)
              heard.insert({from, at});
          }
        }
    }
    ASSERT_EQ(heard.size(), size_t(nodes * (nodes - 1))) << "the nodes did not link in 20 s";
  }

  // A test's own settings per node, applied before the nodes start (SetUp
  // runs before the test body: a suite sets it in its constructor).
  std::function<void(int, node_config&)> configure_;
  std::unique_ptr<testing::nats_test_server> nats_;  // with the nats driver
  std::unique_ptr<pgtest::scratch_database> db_;
  std::filesystem::path key_dir_;
  std::vector<cluster_node> nodes_;
};

}  // namespace waggle::e2e
