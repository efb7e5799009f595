#pragma once

// The fixture of the replica end-to-end tests (tests/e2e/replica_*_e2e_test.cpp): the real
// `waggle` binary, one per test, over a fresh database on the test primary with two open
// communities (alpha.test, beta.test), reading from the test run's streaming standby
// (--read-database-url, tests/support/standby.hpp) with --log-level debug and a 100 ms
// heartbeat. Clients are node_e2e's (login, publish); the node's own view of its routing is
// read from /metrics (waggle_route_decisions_total and the replica pool counters) and from
// its debug lines `component=route msg="read routed"` (docs/replicas.md).
//
// One test per process under ctest, holding the RESOURCE_LOCK waggle_standby: a test may
// pause or stop the standby; restore_on_exit puts it back after the node has stopped.

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>

#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include <pqxx/pqxx>

#include "tests/support/free_port.hpp"
#include "tests/e2e/node_fixture.hpp"
#include "tests/support/standby.hpp"
#include "tests/support/test_paths.hpp"

extern char** environ;

namespace waggle::e2e {

// What one REQ got: its events, then EOSE, or a CLOSED; NOTICEs seen meanwhile.
struct req_result {
  std::vector<std::string> ids;
  bool eose = false;
  std::string closed;  // the CLOSED message, "" when none
  std::vector<std::string> notices;
  bool timed_out = false;
  // Answered completely and without an error.
  bool clean() const { return eose && closed.empty() && notices.empty() && !timed_out; }
  bool has(const std::string& id) const {
    return std::find(ids.begin(), ids.end(), id) != ids.end();
  }
  std::string describe() const {
    std::string s = std::to_string(ids.size()) + " events";
    s += eose ? ", EOSE" : ", no EOSE";
    if (!closed.empty())
      s += ", CLOSED \"" + closed + "\"";
    for (const auto& n : notices)
      s += ", NOTICE \"" + n + "\"";
    if (timed_out)
      s += ", timed out";
    return s;
  }
};

// The one routing decision a read was counted under ("history/replica/covered"), or what
// was counted instead ("none", or several "a+b").
struct route {
  std::string path, decision, reason;
  std::string key() const { return path + "/" + decision + "/" + reason; }
};

using labels = std::map<std::string, std::string>;

class replica_e2e : public node_e2e {
 protected:
  // Hide node_e2e's in-process node: every test spawns its own binary.
  static void SetUpTestSuite() {}
  static void TearDownTestSuite() {}

  void SetUp() override {
    ASSERT_TRUE(standby::configured());
    ASSERT_TRUE(standby::make_healthy());
    static int n = 0;
    dir_ = std::filesystem::temp_directory_path() /
           ("waggle-replica-e2e-" + std::to_string(::getpid()) + "-" + std::to_string(n++));
    std::filesystem::create_directories(dir_);
    pdb_ = std::make_unique<pgtest::scratch_database>(
      "replica", pgtest::scratch_database::content::migrated);
    auto conn = pdb_->connect();
    ASSERT_TRUE(db::apply_migrations(*conn, db::embedded_migrations()).has_value());
    auto a = db::add_community(*conn, "alpha.test", "Alpha", community_policy::open);
    auto b = db::add_community(*conn, "beta.test", "Beta", community_policy::open);
    ASSERT_TRUE(a.has_value() && b.has_value());
    alpha_ = a->id;
    beta_ = b->id;
    // The database exists on the standby before the node asks for it there.
    ASSERT_TRUE(standby::wait_replayed(pdb_->url()));
  }

  void TearDown() override {
    stop_node();
    pdb_.reset();
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }

  // Spawns the node with the replica flags and `extra`, waits for /readyz (a start-up
  // detector: 15 s). `reader` false: no --read-database-url.
  void start_node(const std::vector<std::string>& extra = {}, bool reader = true) {
    node_port_ = free_port();
    ASSERT_NE(node_port_, 0) << "no free port";
    port_ = node_port_;  // node_e2e's clients (login, publish) connect here
    std::vector<std::string> args = {
      waggle::test_paths::binary, "serve", "--port", std::to_string(node_port_), "--bind", "127.0.0.1",
      "--database-url", pdb_->url(), "--data-dir", dir_.string(), "--drain-seconds", "1",
      "--log-level", "debug", "--heartbeat-interval-ms", "100", "--max-connections-per-ip",
      "0", "--new-connections-per-second", "0"};
    if (reader)
      args.insert(args.end(), {"--read-database-url", standby::url_for(pdb_->name())});
    args.insert(args.end(), extra.begin(), extra.end());
    std::vector<char*> argv;
    for (auto& a : args)
      argv.push_back(a.data());
    argv.push_back(nullptr);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    auto log = log_path().string();
    posix_spawn_file_actions_addopen(&fa, 2, log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    posix_spawn_file_actions_adddup2(&fa, 2, 1);
    int rc = ::posix_spawn(&node_pid_, waggle::test_paths::binary, &fa, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&fa);
    ASSERT_EQ(rc, 0) << "could not start " << waggle::test_paths::binary;
    auto until = std::chrono::steady_clock::now() + 15s;
    while (std::chrono::steady_clock::now() < until) {
      if (ready())
        return;
      int status = 0;
      if (::waitpid(node_pid_, &status, WNOHANG) == node_pid_) {
        node_pid_ = 0;
        FAIL() << "the node exited at start-up; its log:\n" << node_log();
      }
      std::this_thread::sleep_for(50ms);
    }
    FAIL() << "the node did not answer /readyz 200 within 15 s; its log:\n" << node_log();
  }

  void stop_node() {
    if (node_pid_ <= 0)
      return;
    ::kill(node_pid_, SIGTERM);
    int status = 0;
    bool gone = false;
    for (int i = 0; i < 500 && !gone; ++i) {  // 10 s, then SIGKILL
      gone = ::waitpid(node_pid_, &status, WNOHANG) == node_pid_;
      if (!gone)
        std::this_thread::sleep_for(20ms);
    }
    if (!gone) {
      ::kill(node_pid_, SIGKILL);
      ::waitpid(node_pid_, &status, 0);
    }
    node_pid_ = 0;
  }

  bool ready() {
    return gateway::http_request("127.0.0.1", node_port_, "GET", "/readyz", {}, {}, 1s).status ==
           200;
  }

  std::filesystem::path log_path() const { return dir_ / "node.log"; }
  std::string node_log() const {
    std::ifstream in(log_path());
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }

  // logfmt fields of one line (quoted values unquoted, \" unescaped).
  static labels logfmt(const std::string& line) {
    labels out;
    size_t i = 0;
    while (i < line.size()) {
      while (i < line.size() && line[i] == ' ')
        ++i;
      auto eq = line.find('=', i);
      auto sp = line.find(' ', i);
      if (eq == std::string::npos || (sp != std::string::npos && sp < eq)) {
        i = sp == std::string::npos ? line.size() : sp + 1;
        continue;
      }
      std::string key = line.substr(i, eq - i), value;
      i = eq + 1;
      if (i < line.size() && line[i] == '"') {
        for (++i; i < line.size() && line[i] != '"'; ++i) {
          if (line[i] == '\\' && i + 1 < line.size())
            ++i;
          value += line[i];
        }
        ++i;
      } else {
        auto end = line.find(' ', i);
        value = line.substr(i, end == std::string::npos ? std::string::npos : end - i);
        i = end == std::string::npos ? line.size() : end;
      }
      out[key] = value;
    }
    return out;
  }

  // The node's `read routed` debug lines, in order.
  std::vector<labels> route_lines() const {
    std::vector<labels> out;
    std::stringstream ss(node_log());
    for (std::string line; std::getline(ss, line);)
      if (line.find("component=route") != std::string::npos &&
          line.find("msg=\"read routed\"") != std::string::npos)
        out.push_back(logfmt(line));
    return out;
  }

  // Every sample of /metrics as (name, labels) -> value.
  std::vector<std::pair<std::pair<std::string, labels>, double>> metrics() {
    std::vector<std::pair<std::pair<std::string, labels>, double>> out;
    auto r = gateway::http_request("127.0.0.1", node_port_, "GET", "/metrics", {}, {}, 5s);
    EXPECT_EQ(r.status, 200u) << r.error;
    std::stringstream ss(r.body);
    for (std::string line; std::getline(ss, line);) {
      if (line.empty() || line[0] == '#')
        continue;
      auto brace = line.find('{');
      auto space = line.rfind(' ');
      if (space == std::string::npos)
        continue;
      std::string name = line.substr(0, std::min(brace, space));
      labels ls;
      if (brace != std::string::npos && brace < space) {
        auto close = line.rfind('}', space);
        std::string body = line.substr(brace + 1, close - brace - 1);
        size_t i = 0;
        while (i < body.size()) {
          auto eq = body.find('=', i);
          if (eq == std::string::npos || eq + 1 >= body.size() || body[eq + 1] != '"')
            break;
          std::string key = body.substr(i, eq - i), value;
          size_t j = eq + 2;
          for (; j < body.size() && body[j] != '"'; ++j) {
            if (body[j] == '\\' && j + 1 < body.size())
              ++j;
            value += body[j];
          }
          ls[key] = value;
          i = j + 1;
          if (i < body.size() && body[i] == ',')
            ++i;
        }
      }
      out.push_back({{name, ls}, std::atof(line.c_str() + space + 1)});
    }
    return out;
  }

  // Sum of the samples of `name` whose labels include `want`; -1 when there is none.
  double metric(const std::string& name, const labels& want = {}) {
    double sum = 0;
    bool seen = false;
    for (const auto& [key, value] : metrics()) {
      if (key.first != name)
        continue;
      bool match = std::all_of(want.begin(), want.end(), [&](const auto& kv) {
        auto it = key.second.find(kv.first);
        return it != key.second.end() && it->second == kv.second;
      });
      if (match) {
        sum += value;
        seen = true;
      }
    }
    return seen ? sum : -1;
  }

  // waggle_route_decisions_total by "path/decision/reason".
  std::map<std::string, double> route_counts() {
    std::map<std::string, double> out;
    for (const auto& [key, value] : metrics())
      if (key.first == "waggle_route_decisions_total") {
        auto get = [&](const char* k) {
          auto it = key.second.find(k);
          return it == key.second.end() ? std::string("?") : it->second;
        };
        out[get("path") + "/" + get("decision") + "/" + get("reason")] += value;
      }
    return out;
  }

  // Runs `read` (one routed read, nobody else reading) and returns the decision it was
  // counted under. Anything but exactly one decision counted once: path "none" or "several",
  // reason = what changed.
  route routed(const std::function<void()>& read) {
    auto before = route_counts();
    read();
    auto after = route_counts();
    std::vector<std::string> grown;
    double total = 0;
    for (const auto& [k, v] : after) {
      double d = v - (before.count(k) ? before[k] : 0);
      if (d != 0) {
        grown.push_back(k + " +" + std::to_string(static_cast<int64_t>(d)));
        total += d;
      }
    }
    if (grown.size() == 1 && total == 1) {
      auto k = grown.front().substr(0, grown.front().find(' '));
      auto s1 = k.find('/'), s2 = k.find('/', s1 + 1);
      return {k.substr(0, s1), k.substr(s1 + 1, s2 - s1 - 1), k.substr(s2 + 1)};
    }
    std::string what;
    for (const auto& g : grown)
      what += (what.empty() ? "" : ", ") + g;
    return {grown.empty() ? "none" : "several", "", what.empty() ? "nothing counted" : what};
  }

  // Sends REQ `sub` with `filters` (a JSON list body: `{...},{...}`), reads until EOSE or
  // CLOSED (10 s: a failure detector), then CLOSEs the subscription.
  req_result req(gateway::ws_client& c, const std::string& filters) {
    std::string sub = "r" + std::to_string(next_sub_++);
    c.send_text("[\"REQ\",\"" + sub + "\"," + filters + "]");
    req_result out;
    while (true) {
      auto f = c.read_text(10s);
      if (!f) {
        out.timed_out = true;
        return out;
      }
      auto d = parse(*f);
      if (!d.IsArray() || d.Size() < 2 || !d[0].IsString())
        continue;
      std::string verb = d[0].GetString();
      if (verb == "NOTICE") {
        out.notices.push_back(d[1].IsString() ? d[1].GetString() : *f);
        continue;
      }
      if (!d[1].IsString() || d[1].GetString() != sub)
        continue;  // another subscription's frame
      if (verb == "EVENT" && d.Size() > 2 && d[2].IsObject())
        out.ids.push_back(d[2]["id"].GetString());
      if (verb == "CLOSED") {
        out.closed = d.Size() > 2 && d[2].IsString() ? d[2].GetString() : "(no message)";
        return out;
      }
      if (verb == "EOSE") {
        out.eose = true;
        c.send_text("[\"CLOSE\",\"" + sub + "\"]");
        return out;
      }
    }
  }

  // COUNT with `filter`; the count, or -1 with `closed` set (CLOSED or NOTICE message).
  int64_t count(gateway::ws_client& c, const std::string& filter, std::string* closed = nullptr) {
    std::string sub = "c" + std::to_string(next_sub_++);
    c.send_text("[\"COUNT\",\"" + sub + "\"," + filter + "]");
    while (auto f = c.read_text(10s)) {
      auto d = parse(*f);
      if (!d.IsArray() || d.Size() < 2 || !d[0].IsString())
        continue;
      std::string verb = d[0].GetString();
      if (verb == "NOTICE" || (verb == "CLOSED" && d[1].IsString() && d[1].GetString() == sub)) {
        if (closed)
          *closed = verb + " " + *f;
        return -1;
      }
      if (verb == "COUNT" && d[1].IsString() && d[1].GetString() == sub && d.Size() > 2 &&
          d[2].IsObject() && d[2].HasMember("count"))
        return d[2]["count"].GetInt64();
    }
    if (closed)
      *closed = "timed out";
    return -1;
  }

  // `n` kind-1 events of key `signer` in `community`, written straight into the primary with
  // created_at `at`, `at - 1`, ...: history older than the fence (replica-covered reads), which
  // the relay's created_at window would refuse over the wire. Returns their ids.
  std::vector<std::string> insert_old(int64_t community, int n, int64_t at,
                                      const std::string& content, int signer = 21) {
    std::vector<proto::event> evs;
    for (int i = 0; i < n; ++i)
      evs.push_back(pgtest::make_event(signer, 1, at - i, {}, content + " " + std::to_string(i)));
    auto conn = pdb_->connect();
    auto results = db::write_batch(*conn, pgtest::batch(community, evs));
    std::vector<std::string> ids;
    for (size_t i = 0; i < evs.size(); ++i) {
      EXPECT_EQ(results[i].outcome, write_outcome::stored) << "fixture event " << i;
      ids.push_back(evs[i].id);
    }
    return ids;
  }

  // One statement (or several, ;-separated) on the primary database of this test.
  void exec_primary(const std::string& sql) {
    auto conn = pdb_->connect();
    pqxx::nontransaction tx(*conn);
    tx.exec(sql);
  }

  // Polls `done` until true or `within` (a failure detector, not a timing claim).
  static bool poll(std::chrono::milliseconds within, const std::function<bool()>& done) {
    auto until = std::chrono::steady_clock::now() + within;
    while (std::chrono::steady_clock::now() < until) {
      if (done())
        return true;
      std::this_thread::sleep_for(50ms);
    }
    return done();
  }

  // The filters JSON of a covered read: kind 1 up to `until`.
  static std::string until_filter(int64_t until, const std::string& more = "") {
    return "{\"kinds\":[1],\"until\":" + std::to_string(until) + ",\"limit\":100" + more + "}";
  }
  static std::string head_filter(const std::string& more = "") {
    return "{\"kinds\":[1],\"limit\":100" + more + "}";
  }
  // Repeats `read` until it is counted as `want` ("history/replica/covered") or `within`
  // passes; the last decision seen. Covered reads wait out the ~1 s in which freshly inserted
  // old rows keep their community off the replica; bounded ones the first heartbeats.
  route route_until(const std::string& want, const std::function<void()>& read,
                    std::chrono::milliseconds within = 20s) {
    route last;
    poll(within, [&] {
      last = routed(read);
      return last.key() == want;
    });
    return last;
  }

  static std::set<std::string> as_set(const std::vector<std::string>& v) { return {v.begin(), v.end()}; }

  // The standby is put back last (declared first), after the node is gone.
  standby::restore_on_exit restore_;
  std::unique_ptr<pgtest::scratch_database> pdb_;
  std::filesystem::path dir_;
  pid_t node_pid_ = 0;
  uint16_t node_port_ = 0;
  int64_t alpha_ = 0, beta_ = 0;
  int next_sub_ = 0;
};

}  // namespace waggle::e2e
