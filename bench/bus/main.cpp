// waggle-bus-bench: publish-to-receive latency and saturation of a bus driver
// across two nodes in this process (docs/benchmarks.md, "Bus"; scripts/bench
// runs it as the `bus` scenario).
//
//   waggle-bus-bench --bus inproc|postgres|caf|nats [--database-url URL] [--nats-url URL]
//                    --mode latency|saturate
//
// Node A publishes; node B subscribes (the remote figures), and so does a
// subscriber on A (the local reference). inproc has one node: its "remote"
// subscriber is a second subscriber on that node. nats: two nodes, each with
// its own connection to the NATS server at --nats-url (no database).
//
// latency: --probes messages --interval-ms apart, in phases side by side:
//   idle   nothing else running;
//   held   (--hold-pool, not inproc) every PostgreSQL connection slot left,
//          each blocked behind an advisory lock the tool holds, for the whole
//          phase: nothing that needs another connection could proceed;
//   flood  (--flood-window N > 0) node A publishing as fast as its bus
//          acknowledges, N in flight, to a subject node B subscribes to.
// saturate: open-loop steps at --rates messages/s of --payload bytes, each
//   --step-seconds long, then a drain; per step the delivered rate, latency
//   (from each message's due time), lagged and lost counts, CPU of this
//   process and of PostgreSQL, write transactions, WAL syncs, NOTIFYs and the
//   wait events of PostgreSQL's active backends. The knee: the first step
//   delivering under 90 % of offered within the step, or with p99 over
//   --knee-p99-ms.
//
// --json FILE (everything), --tsv FILE (numeric figures, "key<TAB>value", for
// scripts/bench's medians); a markdown summary on stdout.

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "bench/bus/cluster.hpp"
#include "bench/bus/watch.hpp"

using namespace waggle::busbench;
using namespace std::chrono_literals;

namespace {

struct options {
  std::string driver, database_url, nats_url = "nats://127.0.0.1:4222", mode = "latency", json,
    tsv;
  size_t probes = 200;
  int interval_ms = 20;
  bool hold_pool = false;
  uint32_t flood_window = 0;
  std::vector<double> rates{1000, 2000, 5000, 10000, 20000, 50000};
  double step_seconds = 3;
  double drain_seconds = 10;
  double knee_p99_ms = 100;
  size_t payload = 256;
  size_t hold_cap = 1000;
  int server_pid = 0;  // --server-pid: the NATS server's process, for its CPU
};

[[noreturn]] void die_usage(const std::string& why) {
  std::cerr << "waggle-bus-bench: " << why
            << "\nusage: waggle-bus-bench --bus inproc|postgres|caf|nats [--database-url URL]"
               " [--nats-url URL]"
               " [--mode latency|saturate] [--probes N] [--interval-ms MS] [--hold-pool]"
               " [--flood-window N] [--rates R1,R2,...] [--step-seconds S] [--drain-seconds S]"
               " [--knee-p99-ms MS] [--payload BYTES] [--server-pid PID] [--json FILE]"
               " [--tsv FILE]\n";
  std::exit(2);
}

options parse(int argc, char** argv) {
  options o;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc)
        die_usage(a + " needs a value");
      return argv[++i];
    };
    if (a == "--bus")
      o.driver = next();
    else if (a == "--database-url")
      o.database_url = next();
    else if (a == "--nats-url")
      o.nats_url = next();
    else if (a == "--mode")
      o.mode = next();
    else if (a == "--probes")
      o.probes = std::stoul(next());
    else if (a == "--interval-ms")
      o.interval_ms = std::stoi(next());
    else if (a == "--hold-pool")
      o.hold_pool = true;
    else if (a == "--flood-window")
      o.flood_window = static_cast<uint32_t>(std::stoul(next()));
    else if (a == "--rates") {
      o.rates.clear();
      std::stringstream in(next());
      for (std::string r; std::getline(in, r, ',');)
        o.rates.push_back(std::stod(r));
    } else if (a == "--step-seconds")
      o.step_seconds = std::stod(next());
    else if (a == "--drain-seconds")
      o.drain_seconds = std::stod(next());
    else if (a == "--knee-p99-ms")
      o.knee_p99_ms = std::stod(next());
    else if (a == "--payload")
      o.payload = std::stoul(next());
    else if (a == "--server-pid")
      o.server_pid = std::stoi(next());
    else if (a == "--json")
      o.json = next();
    else if (a == "--tsv")
      o.tsv = next();
    else if (a == "--help" || a == "-h")
      die_usage("help");
    else
      die_usage("unknown option " + a);
  }
  if (o.driver != "inproc" && o.driver != "postgres" && o.driver != "caf" && o.driver != "nats")
    die_usage("--bus must be inproc, postgres, caf or nats");
  if (o.driver != "nats")
    o.nats_url.clear();
  else
    o.database_url.clear();  // nothing of a NATS bus is in the database
  if ((o.driver == "postgres" || o.driver == "caf") && o.database_url.empty())
    die_usage("--database-url is needed for " + o.driver);
  if (o.mode != "latency" && o.mode != "saturate")
    die_usage("--mode must be latency or saturate");
  if (o.payload < 32)
    o.payload = 32;
  return o;
}

std::string esc(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20)
          out += ' ';
        else
          out += c;
    }
  }
  return out;
}

std::string num(double v, int digits = 3) {
  if (!std::isfinite(v))
    return "0";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

// The figures of a run: numeric ones (TSV and JSON) and text ones (JSON).
struct figures {
  std::vector<std::pair<std::string, double>> numbers;
  std::vector<std::pair<std::string, std::string>> texts;
  void set(const std::string& k, double v) { numbers.emplace_back(k, v); }
  void text(const std::string& k, const std::string& v) { texts.emplace_back(k, v); }
  void latency(const std::string& prefix, const latency_summary& s) {
    set(prefix + "/received", static_cast<double>(s.received));
    set(prefix + "/p50_ms", s.p50);
    set(prefix + "/p90_ms", s.p90);
    set(prefix + "/p99_ms", s.p99);
    set(prefix + "/max_ms", s.max);
    set(prefix + "/lagged_notices", static_cast<double>(s.lagged_notices));
    set(prefix + "/lagged_missed", static_cast<double>(s.lagged_missed));
    set(prefix + "/out_of_order", static_cast<double>(s.out_of_order));
  }
  void cost(const std::string& prefix, const usage& u, bool pg, bool server = false) {
    set(prefix + "/process_cores", u.process_cores);
    if (server)
      set(prefix + "/server_cores", u.server_cores);
    set(prefix + "/machine_busy", u.machine_busy);
    for (size_t i = 0; i < u.threads.size(); ++i) {
      set(prefix + "/thread" + std::to_string(i + 1) + "_cores", u.threads[i].second);
      text(prefix + "/thread" + std::to_string(i + 1), u.threads[i].first);
    }
    if (!pg)
      return;
    set(prefix + "/postgres_cores", u.postgres_cores);
    set(prefix + "/xids_per_s", u.xids_per_s);
    set(prefix + "/commits_per_s", u.commits_per_s);
    set(prefix + "/wal_kb_per_s", u.wal_kb_per_s);
    set(prefix + "/wal_syncs_per_s", u.wal_syncs_per_s);
    set(prefix + "/active_backends", u.active_backends);
    for (auto& [k, v] : u.waits)
      set(prefix + "/wait/" + k, v);
    for (auto& [k, v] : u.statements)
      text(prefix + "/statement/" + num(100 * v, 1), k);
  }
};

// Waits until every sink got `want` or `bound` passed; the seconds waited.
double wait_for(const std::vector<std::shared_ptr<sink>>& sinks, uint64_t want,
                std::chrono::duration<double> bound) {
  auto start = std::chrono::steady_clock::now();
  while (std::chrono::steady_clock::now() - start < bound) {
    bool all = true;
    for (auto& s : sinks)
      if (s->count() < want)
        all = false;
    if (all)
      break;
    std::this_thread::sleep_for(2ms);
  }
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

uint64_t notifies(cluster& c) {
  uint64_t n = c.a().stats->bus.notifies.load();
  if (c.nodes() > 1)
    n += c.b().stats->bus.notifies.load();
  return n;
}

std::string top_waits(const usage& u, size_t n) {
  std::vector<std::pair<double, std::string>> v;
  for (auto& [k, share] : u.waits)
    v.emplace_back(share, k);
  std::sort(v.rbegin(), v.rend());
  std::string out;
  for (size_t i = 0; i < v.size() && i < n; ++i)
    out += (i ? ", " : "") + v[i].second + " " + num(100 * v[i].first, 0) + " %";
  return out.empty() ? "-" : out;
}

void run_latency(const options& o, cluster& c, watcher& w, figures& f) {
  bool pg = !o.database_url.empty() && o.driver != "inproc";
  std::vector<std::string> phases{"idle"};
  if (o.hold_pool && pg)
    phases.push_back("held");
  if (o.flood_window > 0)
    phases.push_back("flood");
  std::cout
    << "| phase | remote p50 / p99 / max (ms) | remote received | local p50 / p99 / max (ms) "
       "| publish errors | notes |\n|---|---|---|---|---|---|\n";
  for (const auto& phase : phases) {
    auto subject = "bench.lat." + phase;
    auto remote = c.subscribe(c.b(), subject);
    auto local = c.subscribe(c.a(), subject);
    std::shared_ptr<sink> flood_sink;
    std::optional<pool_hold> hold;
    std::string notes;
    uint64_t errors0 = c.counters().errors.load(), flood0 = 0;
    int64_t flood_t0 = 0;
    if (phase == "held") {
      hold.emplace(w, o.database_url, o.hold_cap);
      f.set("held/connections", static_cast<double>(hold->held));
      f.set("held/waiting_on_lock", static_cast<double>(hold->waiting));
      f.set("held/max_connections", hold->max_connections);
      f.set("held/superuser_reserved", hold->reserved);
      f.set("held/client_backends", hold->total_backends);
      f.set("held/superuser", hold->superuser ? 1 : 0);
      f.text("held/refused", hold->refused);
      f.text("held/probe_refused", hold->probe_refused);
      notes = std::to_string(hold->held) + " connections held (" + std::to_string(hold->waiting) +
              " seen waiting on the lock), " + std::to_string(hold->total_backends) + " of " +
              std::to_string(hold->max_connections) +
              " slots in use; one more refused: " + hold->probe_refused;
    }
    if (phase == "flood") {
      flood_sink = c.subscribe(c.b(), "bench.flood");
      c.flood("bench.flood", o.flood_window);
      std::this_thread::sleep_for(1s);  // the flood up to speed
      flood0 = c.counters().flood_acked.load();
      flood_t0 = now_ns();
    }
    w.begin();
    auto start = std::chrono::steady_clock::now();
    for (size_t i = 0; i < o.probes; ++i) {
      std::this_thread::sleep_until(start + i * std::chrono::milliseconds{o.interval_ms});
      c.publish(subject, i, 1, now_ns(), 0);
    }
    wait_for({remote, local}, o.probes, phase == "flood" ? 20s : 5s);
    auto u = w.end();
    if (phase == "flood") {
      double rate = static_cast<double>(c.counters().flood_acked.load() - flood0) * 1e9 /
                    static_cast<double>(now_ns() - flood_t0);
      c.stop_flood();
      auto fl = summarize(*flood_sink);
      f.set("flood/acked_per_s", rate);
      f.set("flood/window", o.flood_window);
      f.latency("flood/messages", fl);
      notes = "flood of " + num(rate, 0) + " msgs/s acked (" + std::to_string(o.flood_window) +
              " in flight); its own messages p50 / p99 " + num(fl.p50, 1) + " / " + num(fl.p99, 1) +
              " ms";
      std::this_thread::sleep_for(2s);  // let the flood drain before whatever comes next
    }
    if (hold)
      hold->release();
    auto r = summarize(*remote);
    auto l = summarize(*local);
    f.set(phase + "/probes", static_cast<double>(o.probes));
    f.set(phase + "/interval_ms", o.interval_ms);
    f.latency(phase + "/remote", r);
    f.latency(phase + "/local", l);
    f.set(phase + "/publish_errors", static_cast<double>(c.counters().errors.load() - errors0));
    f.cost(phase, u, pg, w.watching_server());
    std::cout << "| " << phase << " | " << num(r.p50, 2) << " / " << num(r.p99, 2) << " / "
              << num(r.max, 2) << " | " << r.received << " / " << o.probes << " | " << num(l.p50, 2)
              << " / " << num(l.p99, 2) << " / " << num(l.max, 2) << " | "
              << (c.counters().errors.load() - errors0) << " | " << notes << " |\n";
  }
}

void run_saturate(const options& o, cluster& c, watcher& w, figures& f) {
  bool pg = !o.database_url.empty() && o.driver != "inproc";
  double best = 0, knee = 0;
  std::vector<std::string> notes;
  std::cout << "| offered msgs/s | delivered msgs/s (in step) | remote p50 / p99 / max (ms) | lost "
               "| lagged | drain s | CPU tool+nodes / postgres (cores) | machine busy | xids/s | "
               "WAL syncs/s | NOTIFYs/s | top waits of active backends |\n"
               "|---|---|---|---|---|---|---|---|---|---|---|---|\n";
  for (double rate : o.rates) {
    auto key = "step/" + num(rate, 0);
    auto subject = "bench.sat." + num(rate, 0);
    auto remote = c.subscribe(c.b(), subject);
    auto local = c.subscribe(c.a(), subject);
    auto& ctr = c.counters();
    uint64_t acked0 = ctr.acked.load(), err0 = ctr.errors.load();
    uint64_t notif0 = notifies(c);
    double interval = 1e9 / rate;
    w.begin();
    auto start_ns = now_ns();
    auto window_ns = static_cast<int64_t>(o.step_seconds * 1e9);
    uint64_t published = 0;
    while (true) {
      auto now = now_ns();
      if (now - start_ns >= window_ns)
        break;
      auto due = static_cast<uint64_t>(static_cast<double>(now - start_ns) / interval) + 1;
      if (due > published) {
        auto n = static_cast<uint32_t>(due - published);
        c.publish(subject, published, n,
                  start_ns + static_cast<int64_t>(interval * static_cast<double>(published)),
                  interval);
        published += n;
      }
      // Each tick publishes what fell due since the last, stamped with the due
      // times: the tick adds up to its length to a message's latency.
      std::this_thread::sleep_for(250us);
    }
    uint64_t in_window = remote->count();
    auto u = w.end();
    auto window_s = static_cast<double>(now_ns() - start_ns) / 1e9;
    uint64_t notified = notifies(c) - notif0;
    // Drain: until every acknowledged message arrived, or the bound.
    auto drain_start = std::chrono::steady_clock::now();
    while (std::chrono::steady_clock::now() - drain_start <
           std::chrono::duration<double>(o.drain_seconds)) {
      uint64_t done = ctr.acked.load() - acked0 + ctr.errors.load() - err0;
      if (done >= published && remote->count() >= ctr.acked.load() - acked0 &&
          local->count() >= ctr.acked.load() - acked0)
        break;
      std::this_thread::sleep_for(5ms);
    }
    double drain =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - drain_start).count();
    bool drained = drain < o.drain_seconds;
    uint64_t acked = ctr.acked.load() - acked0, errors = ctr.errors.load() - err0;
    auto r = summarize(*remote);
    auto l = summarize(*local);
    double delivered = static_cast<double>(in_window) / window_s;
    // Lost: acknowledged and never received (known once drained; else what was
    // still on its way when the drain gave up).
    double lost = static_cast<double>(drained ? acked : published - errors) -
                  static_cast<double>(r.received);
    best = std::max(best, delivered);
    bool ok = delivered >= 0.9 * rate && r.p99 <= o.knee_p99_ms && drained;
    if (!ok && knee == 0)
      knee = rate;
    f.set(key + "/offered_per_s", rate);
    f.set(key + "/published", static_cast<double>(published));
    f.set(key + "/acked", static_cast<double>(acked));
    f.set(key + "/publish_errors", static_cast<double>(errors));
    f.set(key + "/delivered_per_s", delivered);
    f.set(key + "/lost", lost);
    f.set(key + "/drain_s", drain);
    f.set(key + "/drained", drained ? 1 : 0);
    f.set(key + "/notifies_per_s", static_cast<double>(notified) / window_s);
    f.latency(key + "/remote", r);
    f.latency(key + "/local", l);
    f.cost(key, u, pg, w.watching_server());
    std::cout << "| " << num(rate, 0) << " | " << num(delivered, 0) << " | " << num(r.p50, 1)
              << " / " << num(r.p99, 1) << " / " << num(r.max, 1) << " | " << num(lost, 0) << " | "
              << r.lagged_notices << " (" << r.lagged_missed << ") | " << num(drain, 1)
              << (drained ? "" : " (not drained)") << " | " << num(u.process_cores, 2) << " / "
              << (pg ? num(u.postgres_cores, 2)
                     : w.watching_server() ? "nats-server " + num(u.server_cores, 2)
                                           : std::string{"-"})
              << " | " << num(100 * u.machine_busy, 0)
              << " % | " << (pg ? num(u.xids_per_s, 0) : "-") << " | "
              << (pg ? num(u.wal_syncs_per_s, 0) : "-") << " | "
              << num(static_cast<double>(notified) / window_s, 0) << " | "
              << (pg ? top_waits(u, 4) : "-") << " |\n";
    std::ostringstream note;
    note << "- " << num(rate, 0) << "/s: busiest threads of the process:";
    for (auto& [name, cores] : u.threads)
      note << " " << name << " " << num(cores, 2);
    if (pg) {
      std::vector<std::pair<double, std::string>> st;
      for (auto& [k, v] : u.statements)
        st.emplace_back(v, k);
      std::sort(st.rbegin(), st.rend());
      note << "; active backends by statement:";
      for (size_t i = 0; i < st.size() && i < 4; ++i)
        note << " [" << st[i].second << "] " << num(100 * st[i].first, 0) << " %";
    }
    notes.push_back(note.str());
    if (errors > 0) {
      std::lock_guard g{ctr.mtx};
      notes.push_back("- publish errors: " + std::to_string(errors) + ", last: " + ctr.last_error);
    }
    if (!drained) {
      notes.push_back("- step " + num(rate, 0) + " did not drain in " + num(o.drain_seconds, 0) +
                      " s: the higher steps are not run");
      break;
    }
    std::this_thread::sleep_for(1s);
  }
  f.set("saturate/knee_offered_per_s", knee);
  f.set("saturate/best_delivered_per_s", best);
  f.set("saturate/step_seconds", o.step_seconds);
  f.set("saturate/payload_bytes", static_cast<double>(o.payload));
  std::cout << "\n";
  for (auto& n : notes)
    std::cout << n << "\n";
  std::cout << "\nknee: " << (knee > 0 ? num(knee, 0) + " msgs/s offered" : "not reached")
            << "; most delivered: " << num(best, 0) << " msgs/s\n";
}

}  // namespace

int main(int argc, char** argv) {
  auto o = parse(argc, argv);
  figures f;
  try {
    std::string url = o.driver == "inproc" ? std::string{} : o.database_url;
    watcher w(url);
    if (o.server_pid > 0)
      w.watch_server(o.server_pid);
    cluster c(o.driver, url, o.nats_url, o.payload);
    std::this_thread::sleep_for(500ms);  // the workers connected, the first polls done
    std::cout << "waggle-bus-bench --bus " << o.driver << " --mode " << o.mode << ": " << c.nodes()
              << " node(s), " << machine_description() << "\n\n";
    if (o.mode == "latency")
      run_latency(o, c, w, f);
    else
      run_saturate(o, c, w, f);
  } catch (const std::exception& e) {
    std::cerr << "waggle-bus-bench: " << e.what() << "\n";
    return 1;
  }
  if (!o.tsv.empty()) {
    std::ofstream out(o.tsv);
    for (auto& [k, v] : f.numbers)
      out << k << '\t' << num(v, 4) << '\n';
  }
  if (!o.json.empty()) {
    std::ofstream out(o.json);
    out << "{\"tool\": \"waggle-bus-bench\", \"driver\": \"" << o.driver << "\", \"mode\": \""
        << o.mode << "\", \"nodes\": " << (o.driver == "inproc" ? 1 : 2) << ", \"machine\": \""
        << esc(machine_description()) << "\",\n \"figures\": {";
    bool first = true;
    for (auto& [k, v] : f.numbers) {
      out << (first ? "\n  " : ",\n  ") << '"' << esc(k) << "\": " << num(v, 4);
      first = false;
    }
    for (auto& [k, v] : f.texts) {
      out << (first ? "\n  " : ",\n  ") << '"' << esc(k) << "\": \"" << esc(v) << '"';
      first = false;
    }
    out << "\n }\n}\n";
  }
  return 0;
}
