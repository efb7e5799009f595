// Must-show 6 of issue 12 (docs/write-policy.md): a whole node with a
// strfry-style plugin written in a few lines of Python
// (tests/support/policy_plugin.hpp) that rejects events containing "spam".
// (a) it rejects them with its message over WebSocket and POST /events,
// others are accepted and stored; (b) killed, it is restarted, and meanwhile
// the policy holds (fail closed: refused, none stored); (c) a plugin that
// hangs times out (about --write-policy-timeout-ms) without stalling other
// connections.

#include <csignal>

#include <openssl/sha.h>

#include "tests/e2e/node_fixture.hpp"
#include "tests/support/policy_plugin.hpp"

namespace waggle::e2e {
namespace {

constexpr auto policy_timeout = 300ms;
const std::string unavailable = "blocked: write policy unavailable";

class write_policy_e2e : public node_e2e {
 protected:
  // node_e2e's set-up with --write-policy (gtest calls this one for this suite).
  static void SetUpTestSuite() {
    plugin_ = new test::policy_plugin_dir("e2e");
    ASSERT_FALSE(pgtest::admin_url().empty()) << "WAGGLE_TEST_DATABASE_URL is not set";
    db_ = new pgtest::scratch_database("policy", pgtest::scratch_database::content::migrated);
    {
      auto conn = db_->connect();
      ASSERT_TRUE(db::apply_migrations(*conn, db::embedded_migrations()).has_value());
      ASSERT_TRUE(db::add_community(*conn, "alpha.test", "Alpha", community_policy::open).has_value());
    }
    node_config cfg;
    cfg.database_url = db_->url();
    cfg.port = 0;
    key_dir_ = std::filesystem::temp_directory_path() / ("waggle-e2e-wp-" + std::to_string(getpid()));
    cfg.relay_key_file = (key_dir_ / "relay.key").string();
    // Exactly what `waggle serve` would parse from these flags.
    ASSERT_TRUE(parse_serve_config(cfg, {"--write-policy", plugin_->script.string(),
                                         "--write-policy-timeout-ms", "300",
                                         "--write-policy-fail", "closed"})
                  .ok());
    node_ = new node(cfg, node_env::production());
    gateway::server_limits limits;
    limits.max_connections_per_ip = 0;  // every client is 127.0.0.1
    limits.new_connections_per_second = 0;
    server_ = new gateway::server(node_->api(), limits, "127.0.0.1", 0, 1);
    port_ = server_->start();
    for (int i = 0; i < 200 && !node_->ready(); ++i)
      std::this_thread::sleep_for(50ms);
    ASSERT_TRUE(node_->ready());
    ASSERT_TRUE(node_->start_checks().ok());
  }

  static void TearDownTestSuite() {
    node_e2e::TearDownTestSuite();
    delete plugin_;
  }

  static bool pid_alive(int pid) { return pid > 0 && ::kill(pid, 0) == 0; }

  // The OK frame's message (or "(no OK)"), and whether it accepted.
  static std::pair<bool, std::string> ok_of(const std::string& frame) {
    auto d = parse(frame);
    if (!d.IsArray() || d.Size() < 4)
      return {false, "(no OK) " + frame};
    return {d[2].GetBool(), d[3].GetString()};
  }

  bool stored(gateway::ws_client& c, const std::string& id) {
    static int n = 0;
    auto got = history(c, "q" + std::to_string(++n), R"({"ids":[")" + id + R"("]})");
    return got == std::vector<std::string>{id};
  }

  static inline test::policy_plugin_dir* plugin_ = nullptr;
};

TEST_F(write_policy_e2e, rejects_with_the_plugins_message_and_stores_the_rest) {
  auto a = login("alpha.test", alice);
  auto spam = signed_event(alice, 1, "cheap spam for sale");
  EXPECT_EQ(ok_of(publish(*a, spam)), std::make_pair(false, std::string{"blocked: no spam"}));
  auto fine = signed_event(alice, 1, "hello team");
  EXPECT_EQ(ok_of(publish(*a, fine)), std::make_pair(true, std::string{}));
  auto shadow = signed_event(alice, 1, "shadow this one");
  EXPECT_EQ(ok_of(publish(*a, shadow)), std::make_pair(true, std::string{}));
  EXPECT_TRUE(stored(*a, fine.id));
  EXPECT_FALSE(stored(*a, spam.id));
  EXPECT_FALSE(stored(*a, shadow.id)) << "shadowReject: OK true, nothing stored";
  // The plugin sees strfry's fields, with the client's address from the gateway.
  auto source = ok_of(publish(*a, signed_event(alice, 1, "source")));
  EXPECT_EQ(source.second.rfind("blocked: IP4 127.0.0.1 ", 0), 0u) << source.second;
  EXPECT_NE(source.second.find(" new"), std::string::npos) << source.second;
}

TEST_F(write_policy_e2e, ephemeral_events_are_judged_too) {
  auto a = login("alpha.test", alice);
  auto b = login("alpha.test", bob);
  EXPECT_EQ(history(*b, "live", R"({"kinds":[20001]})"), std::vector<std::string>{});
  auto spam = signed_event(alice, 20001, "spam typing");
  auto shadow = signed_event(alice, 20001, "shadow typing");
  auto fine = signed_event(alice, 20001, "typing");
  EXPECT_FALSE(ok_of(publish(*a, spam)).first);
  EXPECT_TRUE(ok_of(publish(*a, shadow)).first);
  EXPECT_TRUE(ok_of(publish(*a, fine)).first);
  // The hub gets A's events in order: anything before "typing" would show first.
  auto f = b->read_text(5s);
  ASSERT_TRUE(f.has_value());
  auto d = parse(*f);
  ASSERT_STREQ(d[0].GetString(), "EVENT") << *f;
  EXPECT_EQ(std::string{d[2]["id"].GetString()}, fine.id);
}

TEST_F(write_policy_e2e, post_events_is_judged_by_the_same_plugin) {
  auto post = [&](const proto::event& ev) { return post_event("alpha.test", bob, ev); };
  auto spam = signed_event(bob, 1, "spam over http");
  auto r = post(spam);
  EXPECT_EQ(r.status, 403u) << r.body;
  EXPECT_NE(r.body.find("blocked: no spam"), std::string::npos) << r.body;
  auto fine = signed_event(bob, 1, "fine over http");
  auto r2 = post(fine);
  EXPECT_EQ(r2.status, 200u) << r2.body;
  auto a = login("alpha.test", alice);
  EXPECT_TRUE(stored(*a, fine.id));
  EXPECT_FALSE(stored(*a, spam.id));
}

TEST_F(write_policy_e2e, a_killed_plugin_is_restarted_and_the_policy_holds_meanwhile) {
  auto a = login("alpha.test", alice);
  EXPECT_TRUE(ok_of(publish(*a, signed_event(alice, 1, "before the kill"))).first);
  int pid = plugin_->wait_pid();
  ASSERT_TRUE(pid_alive(pid));
  ASSERT_EQ(::kill(pid, SIGKILL), 0);
  // Until the restarted plugin judges again, every event is refused.
  std::vector<std::string> refused;
  auto deadline = std::chrono::steady_clock::now() + 10s;
  bool judged = false;
  for (int i = 0; std::chrono::steady_clock::now() < deadline; ++i) {
    auto ev = signed_event(alice, 1, "during the gap " + std::to_string(i));
    auto [accepted, msg] = ok_of(publish(*a, ev));
    if (accepted) {
      judged = true;
      EXPECT_TRUE(stored(*a, ev.id));
      break;
    }
    EXPECT_EQ(msg, unavailable);
    refused.push_back(ev.id);
  }
  ASSERT_TRUE(judged) << "never restarted";
  EXPECT_GE(refused.size(), 1u) << "no event fell in the gap (fail closed not shown)";
  for (auto& id : refused)
    EXPECT_FALSE(stored(*a, id)) << id;
  // A fresh process, judging as before.
  int again = plugin_->wait_pid();
  EXPECT_TRUE(pid_alive(again));
  EXPECT_NE(again, pid);
  EXPECT_FALSE(pid_alive(pid)) << "the killed plugin was reaped";
  EXPECT_EQ(ok_of(publish(*a, signed_event(alice, 1, "spam after restart"))).second,
            "blocked: no spam");
}

TEST_F(write_policy_e2e, a_hung_plugin_times_out_without_stalling_other_connections) {
  auto a = login("alpha.test", alice);
  auto b = login("alpha.test", bob);
  auto t0 = std::chrono::steady_clock::now();
  auto hang = signed_event(alice, 1, "hang forever");
  a->send_text("[\"EVENT\"," + hang.raw + "]");
  // Meanwhile B's REQ is answered at once: reads never wait on the plugin.
  EXPECT_EQ(history(*b, "b", R"({"authors":[")" + test::event_builder{bob}.sign().pubkey
                                + R"("],"kinds":[7]})"),
            std::vector<std::string>{});
  EXPECT_LT(std::chrono::steady_clock::now() - t0, policy_timeout)
    << "B's REQ waited for A's verdict";
  // B's EVENT is answered too, by the fail mode, once the hung plugin is
  // killed (verdicts share the one plugin process), never left hanging.
  auto b_ev = signed_event(bob, 1, "from b meanwhile");
  auto b_ok = ok_of(publish(*b, b_ev));
  EXPECT_EQ(b_ok.second, unavailable);
  auto a_ok = a->read_text(5s);
  auto took = std::chrono::steady_clock::now() - t0;
  ASSERT_TRUE(a_ok.has_value());
  EXPECT_EQ(ok_of(*a_ok), std::make_pair(false, unavailable));
  EXPECT_GE(took, policy_timeout - 50ms);
  EXPECT_LT(took, policy_timeout + 1500ms);
  EXPECT_FALSE(stored(*a, hang.id));
  EXPECT_FALSE(stored(*a, b_ev.id));
  // Restarted, the plugin judges B's next event.
  auto deadline = std::chrono::steady_clock::now() + 10s;
  bool judged = false;
  while (!judged && std::chrono::steady_clock::now() < deadline)
    judged = ok_of(publish(*b, signed_event(bob, 1, "after the stall"))).first;
  EXPECT_TRUE(judged);
}

}  // namespace
}  // namespace waggle::e2e
