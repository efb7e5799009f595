#include "bench/bus/cluster.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <stdexcept>
#include <thread>

#include "actors/bus/caf_bus.hpp"
#include "actors/bus/inproc_bus.hpp"
#include "actors/bus/nats_bus.hpp"
#include "actors/bus/pg_bus.hpp"
#include "actors/support/env.hpp"
#include "messages/register_types.hpp"

namespace waggle::busbench {

using pace_atom = caf::atom_constant<caf::atom("pace")>;
using flood_atom = caf::atom_constant<caf::atom("flood")>;
using stop_atom = caf::atom_constant<caf::atom("stop")>;

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
           std::chrono::steady_clock::now().time_since_epoch())
    .count();
}

std::string make_payload(uint64_t seq, int64_t t_ns, size_t size) {
  char head[40];
  std::snprintf(head, sizeof head, "%016llx%016llx", static_cast<unsigned long long>(seq),
                static_cast<unsigned long long>(t_ns));
  std::string out{head, 32};
  if (size > out.size())
    out.append(size - out.size(), 'x');
  return out;
}

namespace {

bool parse_payload(const std::string& p, uint64_t& seq, int64_t& t_ns) {
  if (p.size() < 32)
    return false;
  try {
    seq = std::stoull(p.substr(0, 16), nullptr, 16);
    t_ns = static_cast<int64_t>(std::stoull(p.substr(16, 16), nullptr, 16));
  } catch (const std::exception&) {
    return false;
  }
  return true;
}

double pct(const std::vector<int64_t>& sorted, double q) {
  if (sorted.empty())
    return 0;
  auto rank = static_cast<size_t>(std::ceil(q * static_cast<double>(sorted.size())));
  rank = std::clamp<size_t>(rank, 1, sorted.size());
  return static_cast<double>(sorted[rank - 1]) / 1e6;
}

struct publisher_state {
  bus_actor bus;
  std::shared_ptr<pub_counters> counters;
  size_t payload = 256;
  bool flooding = false;
  std::string flood_subject;
  uint64_t flood_seq = 0;
};

void publish_one(caf::stateful_actor<publisher_state>* self, const std::string& subject,
                 uint64_t seq, int64_t t_ns, bool flood) {
  auto c = self->state.counters;
  ++c->sent;
  self
    ->request(self->state.bus, caf::infinite,
              bus_publish{subject, make_payload(seq, t_ns, self->state.payload), ""})
    .then(
      [self, c, flood](bus_ack&) {
        ++c->acked;
        if (flood) {
          ++c->flood_acked;
          auto& st = self->state;
          if (st.flooding)
            publish_one(self, st.flood_subject, st.flood_seq++, now_ns(), true);
        }
      },
      [self, c](caf::error& err) {
        ++c->errors;
        std::lock_guard g{c->mtx};
        c->last_error = self->system().render(err);
      });
}

caf::behavior publisher_impl(caf::stateful_actor<publisher_state>* self, bus_actor bus,
                             std::shared_ptr<pub_counters> counters, size_t payload) {
  self->state.bus = std::move(bus);
  self->state.counters = std::move(counters);
  self->state.payload = payload;
  return {
    [self](pace_atom, const std::string& subject, uint64_t first, uint32_t n, int64_t t_first,
           double interval) {
      for (uint32_t i = 0; i < n; ++i)
        publish_one(self, subject, first + i,
                    t_first + static_cast<int64_t>(interval * static_cast<double>(i)), false);
    },
    [self](flood_atom, const std::string& subject, uint32_t window) {
      auto& st = self->state;
      st.flooding = true;
      st.flood_subject = subject;
      for (uint32_t i = 0; i < window; ++i)
        publish_one(self, subject, st.flood_seq++, now_ns(), true);
    },
    [self](stop_atom) { self->state.flooding = false; },
  };
}

struct system_config : caf::actor_system_config {
  system_config() {
    register_types(*this);
    // A node takes one scheduler thread per core (actors/node/node.cpp); this
    // machine has two.
    set("scheduler.max-threads",
        static_cast<size_t>(std::max(1u, std::thread::hardware_concurrency())));
    set("work-stealing.moderate-poll-attempts", size_t{0});
  }
};

}  // namespace

latency_summary summarize(const sink& s) {
  std::vector<int64_t> v;
  latency_summary out;
  {
    std::lock_guard g{s.mtx};
    v = s.latency_ns;
    out.received = s.received;
    out.lagged_notices = s.lagged_notices;
    out.lagged_missed = s.lagged_missed;
    out.out_of_order = s.out_of_order;
  }
  std::sort(v.begin(), v.end());
  out.p50 = pct(v, 0.50);
  out.p90 = pct(v, 0.90);
  out.p99 = pct(v, 0.99);
  out.max = v.empty() ? 0 : static_cast<double>(v.back()) / 1e6;
  return out;
}

std::unique_ptr<bus_node> cluster::start(const std::string& driver, const std::string& name,
                                         const std::string& database_url,
                                         const std::string& nats_url) {
  auto n = std::make_unique<bus_node>();
  n->name = name;
  n->stats->bus.driver = driver;
  n->cfg = std::make_unique<system_config>();
  if (driver == "caf")
    configure_caf_bus(*n->cfg, caf_bus_settings{}.protocol_version);
  n->sys = std::make_unique<caf::actor_system>(*n->cfg);
  auto env = node_env::production();
  env.stats = n->stats;
  if (driver == "postgres") {
    pg_bus_settings s;
    s.database_url = database_url;
    s.node_id = name;
    n->bus = n->sys->spawn(pg_bus_impl, s, env.for_actor("bus"));
  } else if (driver == "caf") {
    caf_bus_settings s;
    s.database_url = database_url;
    s.node_id = name;
    s.refresh = std::chrono::milliseconds{200};  // find the peer quickly at start
    auto bus = spawn_caf_bus(*n->sys, s, env.for_actor("bus"));
    if (!bus)
      throw std::runtime_error("the CAF bus did not start: " + n->sys->render(bus.error()));
    n->bus = caf::actor_cast<bus_actor>(*bus);
  } else if (driver == "nats") {
    // Each node its own NATS connection, as two processes would have.
    nats_bus_settings s;
    s.url = nats_url;
    s.node_id = name;
    auto bus = spawn_nats_bus(*n->sys, s, env.for_actor("bus"));
    if (!bus)
      throw std::runtime_error("the NATS bus did not start: " + n->sys->render(bus.error()));
    n->bus = caf::actor_cast<bus_actor>(*bus);
  } else if (driver == "inproc") {
    n->bus = n->sys->spawn(inproc_bus_impl, env.for_actor("bus"));
  } else {
    throw std::invalid_argument("no bus driver " + driver);
  }
  return n;
}

cluster::cluster(const std::string& driver, const std::string& database_url,
                 const std::string& nats_url, size_t payload_bytes) {
  a_ = start(driver, "bench-a", database_url, nats_url);
  if (driver != "inproc")
    b_ = start(driver, "bench-b", database_url, nats_url);
  if (driver == "caf") {
    for (int i = 0;; ++i) {
      if (a_->stats->bus.peers.load() >= 1 && b_->stats->bus.peers.load() >= 1)
        break;
      if (i > 400)
        throw std::runtime_error("the CAF bus nodes did not connect within 20 s");
      std::this_thread::sleep_for(std::chrono::milliseconds{50});
    }
  }
  publisher_ = a_->sys->spawn(publisher_impl, a_->bus, counters_, payload_bytes);
}

cluster::~cluster() {
  // Urgent exits: an ordinary one queues behind a step that did not drain
  // (millions of messages on a quiet machine), and the actor system's
  // destructor waited minutes for the backlog to be handled.
  auto kill = [](const auto& who) {
    caf::anon_send<caf::message_priority::high>(
      caf::actor_cast<caf::actor>(who), caf::exit_msg{caf::actor_addr{}, caf::exit_reason::kill});
  };
  kill(publisher_);
  for (auto& s : subscribers_)
    kill(s);
  for (auto* n : {b_.get(), a_.get()})
    if (n)
      kill(n->bus);
  b_.reset();
  a_.reset();
}

std::shared_ptr<sink> cluster::subscribe(bus_node& node, const std::string& subject) {
  auto s = std::make_shared<sink>();
  auto sub = node.sys->spawn(
    [s](bus_subscriber_actor::pointer) -> bus_subscriber_actor::behavior_type {
      return {
        [s](bus_message& msg) {
          auto now = now_ns();
          uint64_t seq = 0;
          int64_t t = 0;
          if (!parse_payload(msg.payload, seq, t))
            return;
          std::lock_guard g{s->mtx};
          s->latency_ns.push_back(now - t);
          ++s->received;
          if (static_cast<int64_t>(seq) < s->last_seq)
            ++s->out_of_order;
          s->last_seq = std::max<int64_t>(s->last_seq, static_cast<int64_t>(seq));
          s->last_receipt_ns = now;
        },
        [s](bus_lagged& lag) {
          std::lock_guard g{s->mtx};
          ++s->lagged_notices;
          s->lagged_missed += lag.missed;
        },
      };
    });
  subscribers_.push_back(caf::actor_cast<caf::actor>(sub));
  caf::scoped_actor self{*node.sys};
  caf::error failed;
  self->request(node.bus, std::chrono::seconds{30}, bus_subscribe{subject, "", sub})
    .receive([](bus_subscription&) {}, [&](caf::error& err) { failed = std::move(err); });
  if (failed)
    throw std::runtime_error("subscribe to " + subject + " on " + node.name +
                             " failed: " + node.sys->render(failed));
  return s;
}

void cluster::publish(const std::string& subject, uint64_t first_seq, uint32_t n,
                      int64_t t_first_ns, double interval_ns) {
  caf::anon_send(publisher_, pace_atom::value, subject, first_seq, n, t_first_ns, interval_ns);
}

void cluster::flood(const std::string& subject, uint32_t window) {
  caf::anon_send(publisher_, flood_atom::value, subject, window);
}

void cluster::stop_flood() { caf::anon_send(publisher_, stop_atom::value); }

}  // namespace waggle::busbench
