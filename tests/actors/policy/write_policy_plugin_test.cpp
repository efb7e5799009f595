// The write-policy plugin actor against a real plugin process (a few lines of
// Python, tests/support/policy_plugin.hpp): verdicts matched by id, the
// request's fields, a malformed answer, a plugin that dies or hangs (restarted,
// fail mode meanwhile), the queue bound, fail open, and no child left behind.
// A real actor system, not the test coordinator: the plugin's answers arrive
// from its reader thread, on the plugin's own schedule.

#include <csignal>

#include <caf/all.hpp>
#include <gtest/gtest.h>

#include "actors/policy/write_policy_plugin.hpp"
#include "messages/register_types.hpp"
#include "tests/support/event_builder.hpp"
#include "tests/support/policy_plugin.hpp"

using namespace waggle;
using namespace std::chrono_literals;

namespace {

const std::string sk(64, '4');

struct system_fixture : ::testing::Test {
  static caf::actor_system_config& config() {
    static caf::actor_system_config cfg = [] {
      caf::actor_system_config c;
      register_types(c);
      c.set("logger.verbosity", caf::atom("quiet"));
      return c;
    }();
    return cfg;
  }
  caf::actor_system sys{config()};
  test::policy_plugin_dir plugin{"actor"};

  write_policy_actor start(write_policy_settings s = {}) {
    if (s.path.empty())
      s.path = plugin.script.string();
    return sys.spawn<caf::detached>(write_policy_actor_impl, s, node_env::production());
  }

  event_ptr event(const std::string& content) {
    static int n = 0;
    return std::make_shared<const proto::event>(
      test::event_builder{sk}.kind(1).content(content).at(1700000000 + ++n).sign());
  }

  policy_verdict ask(const write_policy_actor& p, const std::string& content,
                     std::string ip = "127.0.0.1") {
    caf::scoped_actor self{sys};
    policy_verdict out{policy_action::reject, "(no answer)"};
    self->request(p, 10s, policy_request{event(content), 1700000099, std::move(ip)})
      .receive([&](policy_verdict& v) { out = std::move(v); },
               [&](caf::error& e) { out.msg = "(error) " + caf::to_string(e); });
    return out;
  }

  // Asks until the plugin gives its own verdict again (after a restart).
  bool judged_again(const write_policy_actor& p) {
    auto deadline = std::chrono::steady_clock::now() + 10s;
    while (std::chrono::steady_clock::now() < deadline) {
      if (ask(p, "spam again").msg == "no spam")
        return true;
      std::this_thread::sleep_for(20ms);
    }
    return false;
  }

  void stop(const write_policy_actor& p) {
    caf::scoped_actor self{sys};
    self->send_exit(p, caf::exit_reason::user_shutdown);
    self->wait_for(p);
  }
};

bool is_unavailable(const policy_verdict& v) {
  return v.action == policy_action::reject && v.msg == "blocked: write policy unavailable";
}

TEST_F(system_fixture, judges_each_event_by_its_own_answer) {
  auto p = start();
  EXPECT_EQ(ask(p, "hello").action, policy_action::accept);
  auto r = ask(p, "buy spam now");
  EXPECT_EQ(r.action, policy_action::reject);
  EXPECT_EQ(r.msg, "no spam");
  EXPECT_EQ(ask(p, "shadow me").action, policy_action::shadow_reject);
  stop(p);
}

TEST_F(system_fixture, sends_strfrys_request_fields) {
  auto p = start();
  EXPECT_EQ(ask(p, "source", "10.0.0.7").msg, "IP4 10.0.0.7 1700000099 new");
  EXPECT_EQ(ask(p, "source", "2001:db8::1").msg, "IP6 2001:db8::1 1700000099 new");
  stop(p);
}

TEST_F(system_fixture, concurrent_requests_are_matched_by_id) {
  auto p = start();
  caf::scoped_actor self{sys};
  // Plain sends: the verdicts come back as messages, in whatever order.
  for (int i = 0; i < 50; ++i)
    self->send(p, policy_request{event((i % 2 ? "spam " : "fine ") + std::to_string(i)), 1, ""});
  int answered = 0, rejected = 0;
  self->receive_for(answered, 50)([&](policy_verdict& v) {
    rejected += v.action == policy_action::reject && v.msg == "no spam";
  });
  EXPECT_EQ(answered, 50);
  EXPECT_EQ(rejected, 25);
  stop(p);
}

TEST_F(system_fixture, a_malformed_answer_is_ignored_and_the_event_times_out) {
  write_policy_settings s;
  s.timeout = 300ms;
  auto p = start(s);
  auto t0 = std::chrono::steady_clock::now();
  EXPECT_TRUE(is_unavailable(ask(p, "garbage")));
  auto took = std::chrono::steady_clock::now() - t0;
  EXPECT_GE(took, 250ms);
  EXPECT_LT(took, 2s);
  EXPECT_TRUE(judged_again(p));
  stop(p);
}

TEST_F(system_fixture, a_dead_plugin_fails_closed_until_it_is_restarted) {
  auto p = start();
  auto first = plugin.wait_pid();
  ASSERT_GT(first, 0);
  EXPECT_EQ(ask(p, "fine").action, policy_action::accept);
  ::kill(first, SIGKILL);
  // Between the death and the restart (100 ms backoff) events are refused;
  // at least the one that found it dead is.
  auto v = ask(p, "fine too");
  EXPECT_TRUE(is_unavailable(v) || v.action == policy_action::accept) << v.msg;
  EXPECT_TRUE(judged_again(p));
  auto second = plugin.wait_pid();
  EXPECT_GT(second, 0);
  EXPECT_NE(second, first);
  stop(p);
}

TEST_F(system_fixture, a_plugin_that_exits_is_restarted) {
  auto p = start();
  ASSERT_GT(plugin.wait_pid(), 0);
  EXPECT_TRUE(is_unavailable(ask(p, "die")));  // its stdout ends: fail closed at once
  EXPECT_TRUE(judged_again(p));
  stop(p);
}

TEST_F(system_fixture, a_hung_plugin_times_out_and_is_replaced) {
  write_policy_settings s;
  s.timeout = 300ms;
  auto p = start(s);
  auto first = plugin.wait_pid();
  auto t0 = std::chrono::steady_clock::now();
  EXPECT_TRUE(is_unavailable(ask(p, "hang")));
  auto took = std::chrono::steady_clock::now() - t0;
  EXPECT_GE(took, 250ms);
  EXPECT_LT(took, 2s);
  EXPECT_TRUE(judged_again(p));
  EXPECT_NE(::kill(first, 0), 0) << "the hung plugin was killed and reaped";
  stop(p);
}

TEST_F(system_fixture, beyond_the_queue_the_fail_mode_answers_at_once) {
  write_policy_settings s;
  s.max_queue = 1;
  s.timeout = 1500ms;
  auto p = start(s);
  caf::scoped_actor self{sys};
  self->send(p, policy_request{event("hang"), 1, ""});
  std::this_thread::sleep_for(50ms);  // let the first one take the slot
  auto t0 = std::chrono::steady_clock::now();
  EXPECT_TRUE(is_unavailable(ask(p, "fine")));
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 500ms);
  self->receive([](policy_verdict&) {});
  stop(p);
}

TEST_F(system_fixture, fail_open_accepts_while_the_plugin_cannot_answer) {
  write_policy_settings s;
  s.timeout = 300ms;
  s.fail_open = true;
  auto p = start(s);
  EXPECT_EQ(ask(p, "hang").action, policy_action::accept);
  EXPECT_TRUE(judged_again(p));
  stop(p);
}

TEST_F(system_fixture, a_plugin_that_cannot_run_fails_closed) {
  write_policy_settings s;
  s.path = (plugin.dir / "missing").string();
  auto p = start(s);
  EXPECT_TRUE(is_unavailable(ask(p, "fine")));
  stop(p);
}

TEST_F(system_fixture, stopping_the_actor_terminates_and_reaps_the_plugin) {
  auto p = start();
  auto pid = plugin.wait_pid();
  ASSERT_GT(pid, 0);
  EXPECT_EQ(::kill(pid, 0), 0);
  stop(p);
  EXPECT_NE(::kill(pid, 0), 0) << "still there (or a zombie)";
}

}  // namespace
