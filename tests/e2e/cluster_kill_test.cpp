// Must-show 3 of the cluster issue, with real processes: three `waggle
// serve` nodes on one database (PostgreSQL bus), a publisher on node 0 and
// subscribers on nodes 1 and 2. Node 2 is SIGKILLed halfway: node 0 and 1
// keep serving (node 1's subscriber gets every event, once), and node 2's
// client reconnects to node 1 and reads the history with no gap.

#include <chrono>
#include <csignal>
#include <filesystem>
#include <map>
#include <set>
#include <thread>

#include <gtest/gtest.h>
#include <rapidjson/document.h>
#include <spawn.h>
#include <sys/wait.h>

#include "messages/proto/event.hpp"
#include "tests/support/free_port.hpp"
#include "tests/support/event_builder.hpp"
#include "tests/support/pg_fixture.hpp"
#include "tests/support/test_paths.hpp"
#include "gateway/ws_client.hpp"

extern char** environ;

using namespace waggle;
using namespace std::chrono_literals;

namespace {

int64_t unix_now() {
  return std::chrono::duration_cast<std::chrono::seconds>(
           std::chrono::system_clock::now().time_since_epoch())
    .count();
}

struct process {
  pid_t pid = 0;
  uint16_t port = 0;
  ~process() {
    if (pid > 0) {
      ::kill(pid, SIGKILL);
      int status = 0;
      waitpid(pid, &status, 0);
    }
  }
};

std::unique_ptr<process> start(const std::string& url, const std::filesystem::path& dir, int i) {
  auto p = std::make_unique<process>();
  p->port = e2e::free_port();
  std::vector<std::string> args = {waggle::test_paths::binary, "serve", "--port",
                                   std::to_string(p->port), "--database-url", url,
                                   "--data-dir", dir.string(), "--bus", "postgres",
                                   "--node-id", "kill-" + std::to_string(i),
                                   "--log-level", "warn"};
  std::vector<char*> argv;
  for (auto& a : args)
    argv.push_back(a.data());
  argv.push_back(nullptr);
  if (posix_spawn(&p->pid, waggle::test_paths::binary, nullptr, nullptr, argv.data(), environ) != 0)
    p->pid = 0;
  return p;
}

bool ready(uint16_t port) {
  for (int i = 0; i < 300; ++i) {  // waiting for start-up, not timing anything
    if (gateway::http_request("127.0.0.1", port, "GET", "/readyz", {}, {}, 1s).status == 200)
      return true;
    std::this_thread::sleep_for(50ms);
  }
  return false;
}

std::unique_ptr<gateway::ws_client> login(uint16_t port, const std::string& sk) {
  auto c = std::make_unique<gateway::ws_client>();
  EXPECT_TRUE(c->connect("127.0.0.1", port)) << c->error();
  auto challenge = c->read_text(5s);
  EXPECT_TRUE(challenge.has_value());
  rapidjson::Document d;
  d.Parse(challenge->c_str());
  auto auth = test::event_builder{sk}.kind(22242).at(unix_now())
                .tags({{"relay", "ws://127.0.0.1:" + std::to_string(port)},
                       {"challenge", d[1].GetString()}})
                .sign();
  c->send_text("[\"AUTH\"," + auth.raw + "]");
  EXPECT_NE(c->read_text(5s).value_or("").find(",true,"), std::string::npos);
  return c;
}

std::string id_of_event_frame(const std::string& frame) {
  rapidjson::Document d;
  d.Parse(frame.c_str());
  if (d.IsArray() && d.Size() == 3 && std::string(d[0].GetString()) == "EVENT")
    return d[2]["id"].GetString();
  return {};
}

// Three `waggle serve --bus postgres` nodes over a scratch database with an
// open community, node ids kill-<first>, kill-<first+1>, ...
struct cluster {
  pgtest::scratch_database db;
  std::filesystem::path dir;
  int first;
  std::vector<std::unique_ptr<process>> nodes;

  cluster(const std::string& name, int first_id)
    : db(name, pgtest::scratch_database::content::migrated),
      dir(std::filesystem::temp_directory_path() / (name + "-" + std::to_string(getpid()))),
      first(first_id) {}
  ~cluster() {
    nodes.clear();  // killed before their directory goes
    std::filesystem::remove_all(dir);
  }
  void start() {
    {
      auto conn = db.connect();
      ASSERT_TRUE(db::add_community(*conn, "127.0.0.1", "", community_policy::open).has_value());
    }
    std::filesystem::create_directories(dir);
    for (int i = 0; i < 3; ++i) {
      nodes.push_back(::start(db.url(), dir, first + i));
      ASSERT_GT(nodes.back()->pid, 0);
      ASSERT_TRUE(ready(nodes.back()->port)) << "node " << i << " did not become ready";
    }
  }
};

TEST(cluster_kill, a_killed_node_leaves_the_others_serving_and_its_clients_read_on_elsewhere) {
  ASSERT_FALSE(pgtest::admin_url().empty()) << "WAGGLE_TEST_DATABASE_URL is not set";
  cluster c{"cluster_kill", 0};
  ASSERT_NO_FATAL_FAILURE(c.start());
  auto& nodes = c.nodes;
  const auto since = unix_now() - 1;
  auto sub1 = login(nodes[1]->port, pgtest::secret(21));
  auto sub2 = login(nodes[2]->port, pgtest::secret(22));
  for (auto* s : {sub1.get(), sub2.get()}) {
    s->send_text(R"(["REQ","live",{"kinds":[1]}])");
    while (auto f = s->read_text(10s))
      if (f->rfind("[\"EOSE\"", 0) == 0)
        break;
  }
  auto pub = login(nodes[0]->port, pgtest::secret(30));
  std::vector<std::string> committed;
  std::map<std::string, int> heard1;
  for (int k = 0; k < 100; ++k) {
    if (k == 50) {
      ::kill(nodes[2]->pid, SIGKILL);
      int status = 0;
      waitpid(nodes[2]->pid, &status, 0);
      nodes[2]->pid = 0;
    }
    auto ev = test::event_builder{pgtest::secret(30)}.kind(1).at(unix_now())
                .content("tick " + std::to_string(k)).sign();
    pub->send_text("[\"EVENT\"," + ev.raw + "]");
    auto ok = pub->read_text(10s);
    ASSERT_TRUE(ok.has_value());
    ASSERT_NE(ok->find(",true,"), std::string::npos) << *ok;
    committed.push_back(ev.id);
    std::this_thread::sleep_for(10ms);
  }
  while (heard1.size() < committed.size()) {
    auto f = sub1->read_text(5s);
    if (!f)
      break;
    if (auto id = id_of_event_frame(*f); !id.empty())
      ++heard1[id];
  }
  for (auto& id : committed)
    EXPECT_EQ(heard1[id], 1) << "node 1's subscriber and event " << id;
  EXPECT_EQ(heard1.size(), committed.size());

  // Node 2's client: its socket is gone; it reconnects to node 1 and asks
  // for the history since it subscribed.
  std::set<std::string> before_kill;
  while (auto f = sub2->read_text(500ms))
    if (auto id = id_of_event_frame(*f); !id.empty())
      before_kill.insert(id);
  EXPECT_FALSE(sub2->is_open());
  auto again = login(nodes[1]->port, pgtest::secret(22));
  again->send_text(R"(["REQ","h",{"kinds":[1],"since":)" + std::to_string(since) +
                   R"(,"limit":500}])");
  std::set<std::string> history;
  while (auto f = again->read_text(10s)) {
    if (f->rfind("[\"EOSE\"", 0) == 0)
      break;
    if (auto id = id_of_event_frame(*f); !id.empty())
      history.insert(id);
  }
  for (auto& id : committed)
    EXPECT_EQ(history.count(id), 1u) << "a gap in the history read on node 1: " << id;
  EXPECT_LE(before_kill.size(), 50u) << "node 2 delivered after it was killed?";
}

// SIGTERM drains one node (its clients closed with 1001, exit 0) while the
// other nodes' subscriptions carry on: node 2's subscriber receives every
// event published on node 0, before, during and after node 1's drain.
TEST(cluster_kill, a_node_drained_by_sigterm_takes_no_other_nodes_subscription_with_it) {
  ASSERT_FALSE(pgtest::admin_url().empty()) << "WAGGLE_TEST_DATABASE_URL is not set";
  cluster c{"cluster_term", 10};
  ASSERT_NO_FATAL_FAILURE(c.start());
  auto& nodes = c.nodes;
  auto on1 = login(nodes[1]->port, pgtest::secret(21));
  auto sub2 = login(nodes[2]->port, pgtest::secret(22));
  sub2->send_text(R"(["REQ","live",{"kinds":[1]}])");
  while (auto f = sub2->read_text(10s))
    if (f->rfind("[\"EOSE\"", 0) == 0)
      break;
  auto pub = login(nodes[0]->port, pgtest::secret(30));
  std::vector<std::string> committed;
  for (int k = 0; k < 60; ++k) {
    if (k == 20)
      ASSERT_EQ(::kill(nodes[1]->pid, SIGTERM), 0);
    auto ev = test::event_builder{pgtest::secret(30)}.kind(1).at(unix_now())
                .content("tick " + std::to_string(k)).sign();
    pub->send_text("[\"EVENT\"," + ev.raw + "]");
    auto ok = pub->read_text(10s);
    ASSERT_TRUE(ok.has_value());
    ASSERT_NE(ok->find(",true,"), std::string::npos) << *ok;
    committed.push_back(ev.id);
    std::this_thread::sleep_for(20ms);
  }
  int status = 0;
  ASSERT_EQ(waitpid(nodes[1]->pid, &status, 0), nodes[1]->pid);
  nodes[1]->pid = 0;
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "the drained node's exit";
  while (on1->read_text(1s)) {
  }
  EXPECT_EQ(on1->close_code(), 1001) << "the drained node's client is told it is going away";
  std::map<std::string, int> heard;
  while (heard.size() < committed.size()) {
    auto f = sub2->read_text(5s);
    if (!f)
      break;
    if (auto id = id_of_event_frame(*f); !id.empty())
      ++heard[id];
  }
  for (auto& id : committed)
    EXPECT_EQ(heard[id], 1) << "node 2's subscriber and event " << id;
}

}  // namespace
