// Finding 6 of issue 13, through real sockets: one key floods community X
// (alpha.test) with 300 channel creations, sent all at once before reading
// any OK, while a key of community Y (beta.test) creates one channel. Y's
// command must not wait behind X's backlog: the group actor deals commands
// by turns across communities to its sessions (docs/channels.md, "Group
// commands"). The figures are printed; the assertions are structural (how
// many of X's commands were answered before Y's) with a generous time bound,
// never a performance claim.

#include <algorithm>
#include <atomic>
#include <thread>

#include "tests/e2e/node_fixture.hpp"

using namespace waggle;
using namespace std::chrono_literals;

namespace {

using namespace waggle::e2e;

class group_fairness_e2e : public node_e2e {};

using clock_type = std::chrono::steady_clock;

double ms_between(clock_type::time_point a, clock_type::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

// Y's creation with nothing else going on: the unloaded figure, printed.
double create_once(gateway::ws_client& c, const std::string& sk, const std::string& channel) {
  auto ev = signed_event(sk, 9007, "", {{"h", channel}});
  auto start = clock_type::now();
  c.send_text("[\"EVENT\"," + ev.raw + "]");
  while (auto f = c.read_text(30s))
    if (f->rfind("[\"OK\"", 0) == 0) {
      EXPECT_EQ(*f, proto::render_ok(ev.id, true, ""));
      return ms_between(start, clock_type::now());
    }
  ADD_FAILURE() << "no OK for " << channel;
  return 1e9;
}

TEST_F(group_fairness_e2e, another_communitys_channel_creation_does_not_wait_behind_a_flood) {
  constexpr int flood = 300;
  auto x = login("alpha.test", alice);
  auto y = login("beta.test", bob);
  const double unloaded = create_once(*y, bob, "y-warmup");

  std::vector<proto::event> creations;
  for (int i = 0; i < flood; ++i)
    creations.push_back(signed_event(alice, 9007, "", {{"h", "flood-" + std::to_string(i)}}));
  for (auto& ev : creations)
    x->send_text("[\"EVENT\"," + ev.raw + "]");

  // X's OKs, timed as they arrive, on a thread of their own.
  std::vector<clock_type::time_point> x_oks;
  std::atomic<int> x_accepted{0};
  std::thread reader([&] {
    while (static_cast<int>(x_oks.size()) < flood) {
      auto f = x->read_text(60s);
      if (!f)
        return;
      if (f->rfind("[\"OK\"", 0) != 0)
        continue;
      x_oks.push_back(clock_type::now());
      if (f->find(",true,") != std::string::npos)
        ++x_accepted;
    }
  });

  auto y_ev = signed_event(bob, 9007, "", {{"h", "y-channel"}});
  auto y_sent = clock_type::now();
  y->send_text("[\"EVENT\"," + y_ev.raw + "]");
  std::optional<std::string> y_ok;
  while (auto f = y->read_text(60s))
    if (f->rfind("[\"OK\"", 0) == 0) {
      y_ok = f;
      break;
    }
  auto y_answered = clock_type::now();
  reader.join();

  ASSERT_TRUE(y_ok.has_value()) << "Y's creation was never answered";
  EXPECT_EQ(*y_ok, proto::render_ok(y_ev.id, true, ""));
  const double y_ms = ms_between(y_sent, y_answered);
  const auto x_before_y = std::count_if(x_oks.begin(), x_oks.end(),
                                        [&](auto t) { return t < y_answered; });
  const double x_ms = x_oks.empty() ? 0 : ms_between(y_sent, x_oks.back());
  std::printf("group fairness: Y unloaded %.1f ms; Y during X's flood of %d: %.1f ms; "
              "X answered before Y: %ld of %zu; X's flood done %.1f ms after Y's send\n",
              unloaded, flood, y_ms, static_cast<long>(x_before_y), x_oks.size(), x_ms);
  EXPECT_EQ(x_accepted.load(), flood) << "X's creations were not all accepted";
  // By turns: Y waits for the commands already out (one per session) and a
  // few of X's that reached the group actor before Y's, not for X's backlog.
  EXPECT_LT(x_before_y, flood / 2) << "Y's creation waited behind X's backlog";
  EXPECT_LT(y_ms, 3000.0) << "Y's creation took longer than the generous bound";
}

}  // namespace
