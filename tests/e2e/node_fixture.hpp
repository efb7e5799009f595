#pragma once

// The whole-node fixture of the end-to-end tests: one node on an ephemeral
// port over a scratch database with two communities (alpha.test, beta.test),
// driven through real sockets as a Nostr client would. Needs
// WAGGLE_TEST_DATABASE_URL (fails, never skips, without it).

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <thread>

#include <gtest/gtest.h>
#include <openssl/sha.h>
#include <rapidjson/document.h>

#include "actors/node/node.hpp"
#include "gateway/server.hpp"
#include "gateway/ws_client.hpp"
#include "messages/proto/client_message.hpp"
#include "tests/support/pg_fixture.hpp"
#include "tests/support/event_builder.hpp"

namespace waggle::e2e {

using namespace std::chrono_literals;


inline int64_t unix_now() {
  return std::chrono::duration_cast<std::chrono::seconds>(
           std::chrono::system_clock::now().time_since_epoch())
    .count();
}

inline proto::event signed_event(const std::string& sk, int32_t kind, std::string content,
                                 std::vector<proto::tag> tags = {}) {
  return test::event_builder{sk}.kind(kind).at(unix_now()).content(std::move(content))
    .tags(std::move(tags)).sign();
}

inline rapidjson::Document parse(const std::string& text) {
  rapidjson::Document d;
  d.Parse(text.c_str(), text.size());
  return d;
}

inline std::string base64(const std::string& in) {
  static const char* tbl = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  size_t i = 0;
  for (; i + 2 < in.size(); i += 3) {
    uint32_t v = (uint8_t(in[i]) << 16) | (uint8_t(in[i + 1]) << 8) | uint8_t(in[i + 2]);
    for (int s = 18; s >= 0; s -= 6)
      out += tbl[(v >> s) & 63];
  }
  if (i + 1 == in.size()) {
    uint32_t v = uint8_t(in[i]) << 16;
    out += tbl[(v >> 18) & 63];
    out += tbl[(v >> 12) & 63];
    out += "==";
  } else if (i + 2 == in.size()) {
    uint32_t v = (uint8_t(in[i]) << 16) | (uint8_t(in[i + 1]) << 8);
    out += tbl[(v >> 18) & 63];
    out += tbl[(v >> 12) & 63];
    out += tbl[(v >> 6) & 63];
    out += '=';
  }
  return out;
}

// One node on an ephemeral port over a scratch database with two communities.
class node_e2e : public ::testing::Test {
 protected:
  // A failed ASSERT in SetUpTestSuite makes GoogleTest 1.12 report the
  // suite's tests SKIPPED, and ctest counts that as passed; suites that go on
  // to use the node after calling this would crash instead. Neither may
  // pass for a test that never ran (docs/testing.md, "Never skip"), so a node
  // that did not start ends the whole test process with a failure.
  static void SetUpTestSuite() {
    start_node();
    if (!started_) {
      std::fprintf(stderr, "node_e2e: the suite's node did not start (the failure above); "
                           "failing the test process\n");
      std::exit(1);
    }
  }

  static void start_node() {
    ASSERT_FALSE(pgtest::admin_url().empty()) << "WAGGLE_TEST_DATABASE_URL is not set";
    db_ = new pgtest::scratch_database("e2e", pgtest::scratch_database::content::migrated);
    {
      auto conn = db_->connect();
      ASSERT_TRUE(db::apply_migrations(*conn, db::embedded_migrations()).has_value());
      ASSERT_TRUE(db::add_community(*conn, "alpha.test", "Alpha", community_policy::open).has_value());
      ASSERT_TRUE(db::add_community(*conn, "beta.test", "Beta", community_policy::open).has_value());
    }
    node_config cfg;
    cfg.database_url = db_->url();
    cfg.port = 0;
    cfg.expiry_reap_seconds = 1;  // NIP-40: the e2e test waits for a reap, not for 10 s
    cfg.operator_pubkeys = operator_pubkeys_;
    if (configure_)
      configure_(cfg, limits_);
    key_dir_ = std::filesystem::temp_directory_path() / ("waggle-e2e-" + std::to_string(getpid()));
    cfg.relay_key_file = (key_dir_ / "relay.key").string();
    node_ = new node(cfg, node_env::production());
    // Every client of a suite is 127.0.0.1: per-address limits would only
    // count the suite (connection_abuse_e2e_test tests them on its own gateway).
    limits_.max_connections_per_ip = 0;
    limits_.new_connections_per_second = 0;
    server_ = new gateway::server(node_->api(), limits_, "127.0.0.1", 0, 1);
    port_ = server_->start();
    // Wait for the directory's first refresh (readiness, not a timing claim).
    for (int i = 0; i < 200 && !node_->ready(); ++i)
      std::this_thread::sleep_for(50ms);
    ASSERT_TRUE(node_->ready());
    // The fail-closed start-up main() runs: the fence works, rosters repaired.
    auto checked = node_->start_checks();
    ASSERT_TRUE(checked.ok()) << checked.reason;
    node_->start_delivery();  // as main() does once the node serves
    started_ = true;
  }

  static void TearDownTestSuite() {
    if (server_)
      server_->shutdown(std::chrono::seconds(2));
    delete server_;
    delete node_;
    delete db_;
    std::filesystem::remove_all(key_dir_);
  }

  // Connects to `host`, authenticates `sk`, returns the client.
  std::unique_ptr<gateway::ws_client> login(const std::string& host, const std::string& sk) {
    auto c = std::make_unique<gateway::ws_client>();
    EXPECT_TRUE(c->connect("127.0.0.1", port_, host)) << c->error();
    auto challenge_frame = c->read_text(5s);
    EXPECT_TRUE(challenge_frame.has_value());
    auto d = parse(*challenge_frame);
    EXPECT_STREQ(d[0].GetString(), "AUTH");
    std::string challenge = d[1].GetString();
    auto auth = signed_event(sk, 22242, "", {{"relay", "ws://" + host + "/"}, {"challenge", challenge}});
    c->send_text("[\"AUTH\"," + auth.raw + "]");
    auto ok = c->read_text(5s);
    EXPECT_TRUE(ok && ok->find(",true,") != std::string::npos) << ok.value_or("(none)");
    return c;
  }

  // Publishes and returns the OK frame.
  std::string publish(gateway::ws_client& c, const proto::event& ev) {
    c.send_text("[\"EVENT\"," + ev.raw + "]");
    while (auto f = c.read_text(10s))
      if (f->rfind("[\"OK\"", 0) == 0)
        return *f;
    return "(no OK)";
  }

  // POST /events of `ev` to `host`, with `sk`'s NIP-98 authorization (payload
  // tag included) for `u` (default: this request's own URL).
  gateway::http_response post_event(const std::string& host, const std::string& sk,
                                    const proto::event& ev, std::string u = {}) {
    std::string url = u.empty() ? "http://" + host + "/events" : std::move(u);
    unsigned char digest[32];
    SHA256(reinterpret_cast<const unsigned char*>(ev.raw.data()), ev.raw.size(), digest);
    auto auth = signed_event(sk, 27235, "",
                             {{"u", url}, {"method", "POST"}, {"payload", proto::to_hex(digest, 32)}});
    return gateway::http_request("127.0.0.1", port_, "POST", "/events",
                                 {{"Host", host},
                                  {"Authorization", "Nostr " + base64(auth.raw)},
                                  {"Content-Type", "application/json"}},
                                 ev.raw);
  }

  // Reads frames of a subscription until EOSE; returns the event ids.
  std::vector<std::string> history(gateway::ws_client& c, const std::string& sub,
                                   const std::string& filters) {
    c.send_text("[\"REQ\",\"" + sub + "\"," + filters + "]");
    std::vector<std::string> ids;
    while (auto f = c.read_text(10s)) {
      auto d = parse(*f);
      std::string verb = d[0].GetString();
      if (verb != "OK" && verb != "NOTICE" && d.Size() > 1 && d[1].IsString() && d[1].GetString() != sub)
        continue;  // a frame of another live subscription
      if (verb == "EOSE")
        return ids;
      if (verb == "EVENT")
        ids.push_back(d[2]["id"].GetString());
      if (verb == "CLOSED") {
        ids.push_back("CLOSED:" + std::string(d[2].GetString()));
        return ids;
      }
    }
    ids.push_back("(timeout)");
    return ids;
  }

  static inline bool started_ = false;
  static inline pgtest::scratch_database* db_ = nullptr;
  static inline node* node_ = nullptr;
  static inline gateway::server* server_ = nullptr;
  static inline uint16_t port_ = 0;
  // --operator-pubkeys of the node; a suite sets it before SetUpTestSuite.
  static inline std::vector<std::string> operator_pubkeys_;
  // A suite's own settings of the node and its server, applied before start.
  static inline std::function<void(node_config&, gateway::server_limits&)> configure_;
  static inline gateway::server_limits limits_;
  static inline std::filesystem::path key_dir_;
  const std::string alice = pgtest::secret(11);
  const std::string bob = pgtest::secret(12);
};

}  // namespace waggle::e2e
