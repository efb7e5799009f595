#pragma once

// The helpers of tests/e2e/cluster_claims_test.cpp: `waggle serve` processes,
// publishers of mentions at a paced rate, a stand-in operator listener that
// records every request, the nodes' delivery metrics, and the tally of what a
// stand-in received by event id and by signing node.

#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <set>
#include <sstream>
#include <thread>

#include <gtest/gtest.h>
#include <pqxx/pqxx>
#include <rapidjson/document.h>
#include <spawn.h>
#include <sys/wait.h>

#include "bench/load/http_stub.hpp"
#include "bench/load/push_gateway_mock.hpp"
#include "messages/proto/event.hpp"
#include "messages/proto/nip98.hpp"
#include "tests/support/free_port.hpp"
#include "tests/support/event_builder.hpp"
#include "tests/support/pg_fixture.hpp"
#include "tests/support/test_paths.hpp"
#include "gateway/ws_client.hpp"

extern char** environ;

namespace waggle::e2e::claims {

using namespace std::chrono_literals;
using steady = std::chrono::steady_clock;


inline const std::string host = "claims.test";
inline const std::string listener_sk = pgtest::secret(41);
inline const std::string agent_sk = pgtest::secret(50);
inline const std::string agent_pk = proto::pubkey_of(agent_sk);
constexpr int nodes_n = 2;
constexpr int publishers_per_node = 4;
constexpr double total_rate = 200;  // mentions a second, all publishers together

inline int64_t unix_now() {
  return std::chrono::duration_cast<std::chrono::seconds>(
           std::chrono::system_clock::now().time_since_epoch())
    .count();
}

inline int env_int(const char* name, int fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::atoi(v) : fallback;
}

// WAGGLE_CLAIMS_PORT_BASE pins the two nodes' ports (base, base + 1) on a
// machine whose users share out port ranges; by default any free port.
inline uint16_t node_port(int i) {
  int base = env_int("WAGGLE_CLAIMS_PORT_BASE", 0);
  return base > 0 ? static_cast<uint16_t>(base + i) : e2e::free_port();
}

struct node_process {
  pid_t pid = 0;
  uint16_t port = 0;
  std::string relay_pubkey;
  ~node_process() { stop(SIGKILL); }
  void stop(int sig) {
    if (pid <= 0)
      return;
    ::kill(pid, sig);
    int status = 0;
    waitpid(pid, &status, 0);
    pid = 0;
  }
};

// Node i: its own data directory and relay key (so its NIP-98 signature
// names it), the shared listener and gateway, the PostgreSQL bus, and the
// push gate cache off, as docs/push.md asks of several nodes.
inline std::unique_ptr<node_process> start_node(int i, const std::string& db_url,
                                                const std::filesystem::path& dir,
                                                const std::string& listener_url,
                                                const std::string& gateway_url) {
  auto p = std::make_unique<node_process>();
  auto relay_sk = pgtest::secret(61 + i);
  p->relay_pubkey = proto::pubkey_of(relay_sk);
  p->port = node_port(i);
  auto node_dir = dir / ("node" + std::to_string(i));
  std::filesystem::create_directories(node_dir);
  std::ofstream(node_dir / "relay.key") << relay_sk << "\n";
  std::vector<std::string> args = {
    test_paths::binary, "serve", "--port", std::to_string(p->port), "--database-url", db_url,
    "--data-dir", node_dir.string(), "--bus", "postgres", "--node-id",
    "claims-" + std::to_string(i), "--log-level", "warn", "--operator-listeners",
    proto::pubkey_of(listener_sk) + "=" + listener_url, "--push-gateway-url", gateway_url,
    "--push-gate-cache", "off"};
  std::vector<char*> argv;
  for (auto& a : args)
    argv.push_back(a.data());
  argv.push_back(nullptr);
  if (posix_spawn(&p->pid, test_paths::binary, nullptr, nullptr, argv.data(), environ) != 0)
    p->pid = 0;
  return p;
}

inline bool ready(uint16_t port) {
  for (int i = 0; i < 300; ++i) {  // waiting for start-up, not timing anything
    if (gateway::http_request("127.0.0.1", port, "GET", "/readyz", {}, {}, 1s).status == 200)
      return true;
    std::this_thread::sleep_for(50ms);
  }
  return false;
}

inline std::unique_ptr<gateway::ws_client> login(uint16_t port, const std::string& sk) {
  auto c = std::make_unique<gateway::ws_client>();
  if (!c->connect("127.0.0.1", port, host))
    return nullptr;
  auto challenge = c->read_text(5s);
  if (!challenge)
    return nullptr;
  rapidjson::Document d;
  d.Parse(challenge->c_str());
  auto auth = test::event_builder{sk}.kind(22242).at(unix_now())
                .tags({{"relay", "ws://" + host + "/"}, {"challenge", d[1].GetString()}})
                .sign();
  c->send_text("[\"AUTH\"," + auth.raw + "]");
  if (c->read_text(5s).value_or("").find(",true,") == std::string::npos)
    return nullptr;
  return c;
}

inline std::string publish(gateway::ws_client& c, const proto::event& ev) {
  c.send_text("[\"EVENT\"," + ev.raw + "]");
  while (auto f = c.read_text(10s))
    if (f->rfind("[\"OK\"", 0) == 0)
      return *f;
  return "(no OK)";
}

// The stand-in operator listener: answers at once with the status of the
// moment (200 unless told otherwise) and keeps, for every request, the event
// id of its body, the Authorization header and the status it answered.
class recording_listener {
 public:
  struct request {
    std::string event_id;
    std::string authorization;
    std::string body;
    int answered = 0;
  };
  recording_listener()
      : stub_(0, [this](const bench::http_stub::request& req, int64_t) {
          rapidjson::Document d;
          d.Parse(req.body().c_str(), req.body().size());
          request r;
          if (d.IsObject() && d.HasMember("event") && d["event"].IsObject() &&
              d["event"].HasMember("id") && d["event"]["id"].IsString())
            r.event_id = d["event"]["id"].GetString();
          if (auto a = req.find(boost::beast::http::field::authorization); a != req.end())
            r.authorization = std::string{a->value()};
          r.body = req.body();
          r.answered = status_.load();
          std::lock_guard lk(m_);
          got_.push_back(r);
          return r.answered;
        }) {}
  void answer(int status) { status_.store(status); }
  std::string url() const { return stub_.url("/listener"); }
  uint16_t port() const { return stub_.port(); }
  std::vector<request> requests() {
    std::lock_guard lk(m_);
    return got_;
  }
  size_t count() {
    std::lock_guard lk(m_);
    return got_.size();
  }

 private:
  std::atomic<int> status_{200};
  std::mutex m_;
  std::vector<request> got_;
  bench::http_stub stub_;  // last: its io thread stops before the rest goes
};

struct publisher_result {
  size_t published = 0;
  std::vector<std::string> accepted;
  std::vector<std::string> refused;  // the OK frames of refusals
};

// Publishes `n` kind 9 mentions of the agent on one connection, one every
// `period`; a late OK makes it catch up (no sleep while behind), so a loaded
// machine stretches the run rather than shortening the count.
inline void publish_for(uint16_t port, const std::string& sk, int tag, steady::duration period,
                        int n, publisher_result& out) {
  auto c = login(port, sk);
  if (!c) {
    out.refused.push_back("(login failed)");
    return;
  }
  auto next = steady::now();
  for (int k = 0; k < n; ++k) {
    std::this_thread::sleep_until(next);  // pacing the load, not timing a claim
    next += period;
    auto ev = test::event_builder{sk}.kind(9).at(unix_now())
                .content("claims " + std::to_string(tag) + " " + std::to_string(k))
                .tags({{"p", agent_pk}}).sign();
    auto ok = publish(*c, ev);
    ++out.published;
    if (ok.find(",true,") != std::string::npos)
      out.accepted.push_back(ev.id);
    else
      out.refused.push_back(ok);
  }
}

// waggle_deliveries_total{queue,outcome} and waggle_delivery_in_flight of one node.
struct node_metrics {
  std::map<std::pair<std::string, std::string>, double> deliveries;
  double in_flight = -1;
  double get(const std::string& queue, const std::string& outcome) const {
    auto it = deliveries.find({queue, outcome});
    return it == deliveries.end() ? 0 : it->second;
  }
  // Attempts that POSTed (each one request at the stand-in).
  double posted(const std::string& queue) const {
    double n = 0;
    for (auto* o : {"delivered", "retry", "failed", "dropped", "fenced", "unrecorded", "gone"})
      n += get(queue, o);
    return n;
  }
};

inline node_metrics scrape(uint16_t port) {
  node_metrics m;
  auto r = gateway::http_request("127.0.0.1", port, "GET", "/metrics");
  std::istringstream in(r.body);
  std::string line;
  const std::string d = "waggle_deliveries_total{queue=\"";
  while (std::getline(in, line)) {
    if (line.rfind(d, 0) == 0) {
      auto q_end = line.find('"', d.size());
      auto o_at = line.find("outcome=\"", q_end) + 9;
      auto o_end = line.find('"', o_at);
      m.deliveries[{line.substr(d.size(), q_end - d.size()), line.substr(o_at, o_end - o_at)}] =
        std::stod(line.substr(line.rfind(' ') + 1));
    } else if (line.rfind("waggle_delivery_in_flight ", 0) == 0) {
      m.in_flight = std::stod(line.substr(line.rfind(' ') + 1));
    }
  }
  return m;
}

// One request a stand-in received: the event it was for, the node that
// signed it (its relay key) and the status it was answered.
struct hit {
  std::string event_id;
  std::string signer;
  int answered = 0;
};

// Requests of one pipeline, by event id and by signing node. An event is
// delivered by a request answered 2xx; requests answered otherwise (the
// stand-in refusing) are what the nodes retry.
struct tally {
  size_t requests = 0, distinct = 0, duplicates = 0, missing = 0, unknown = 0;
  size_t refused = 0;        // requests answered non-2xx
  size_t delivered_again = 0;  // 2xx answers beyond the first of an event
  std::map<std::string, size_t> by_signer;            // relay pubkey -> requests
  std::map<std::string, size_t> after_refusal_by_signer;  // 2xx of an event refused before
  std::vector<std::string> twice;  // a few event ids delivered (2xx) more than once
};

inline tally count(const std::vector<hit>& seen, const std::vector<std::string>& accepted) {
  tally t;
  std::map<std::string, size_t> per_event, ok_per_event;
  std::set<std::string> wanted(accepted.begin(), accepted.end()), refused_before;
  for (auto& h : seen) {
    ++t.requests;
    ++t.by_signer[h.signer];
    if (!wanted.count(h.event_id))
      ++t.unknown;
    ++per_event[h.event_id];
    if (h.answered < 200 || h.answered > 299) {
      ++t.refused;
      refused_before.insert(h.event_id);
      continue;
    }
    if (refused_before.count(h.event_id))
      ++t.after_refusal_by_signer[h.signer];
    if (++ok_per_event[h.event_id] >= 2) {
      ++t.delivered_again;
      if (t.twice.size() < 5)
        t.twice.push_back(h.event_id);
    }
  }
  t.distinct = per_event.size();
  t.duplicates = t.requests - t.distinct;
  for (auto& id : accepted)
    t.missing += ok_per_event.count(id) == 0;
  return t;
}

inline std::string signer_of(const std::string& authorization, uint16_t port,
                             const std::string& path, const std::string& body) {
  auto v = proto::verify_nip98(authorization, "POST", "127.0.0.1:" + std::to_string(port), path,
                               body, unix_now(), 24 * 3600, true);
  return v.ok ? v.pubkey : "(bad signature)";
}

}  // namespace waggle::e2e::claims
