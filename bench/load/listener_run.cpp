#include "bench/load/listener_run.hpp"

#include <algorithm>
#include <limits>
#include <set>

#include "bench/load/listeners.hpp"

namespace waggle::bench {

listener_side::listener_side(const load_options& o) {
  auto n = o.listener_ports.size();
  for (size_t l = 0; l < n; ++l) {
    receivers_.push_back(
      std::make_unique<listener_receiver>(o.listener_ports[l], l >= n - o.stalled_listeners));
    targets_.push_back(random_keypair().pubkey);
  }
}

listener_side::~listener_side() { stop(); }

std::string listener_side::register_all(const relay_endpoint& relay, const load_options& o,
                                        const std::vector<keypair>& members) {
  for (size_t l = 0; l < receivers_.size(); ++l) {
    std::vector<std::string> mine;
    if (o.kind == workload::chat) {
      for (size_t j = l; j < members.size(); j += receivers_.size())
        mine.push_back(members[j].pubkey);
    } else {
      mine.push_back(targets_[l]);
    }
    if (mine.empty())
      continue;
    if (auto e = register_targets(relay, listener_key(l), mine); !e.empty())
      return "listener " + std::to_string(l) + ": " + e;
  }
  return "";
}

size_t listener_side::healthy_requests() const {
  size_t n = 0;
  for (auto& r : receivers_)
    if (!r->stalled())
      n += r->requests();
  return n;
}

void listener_side::stop() {
  for (auto& r : receivers_)
    r->stop();
}

listener_result listener_side::collect(const publish_clock& clock,
                                       const std::vector<int>& listener_of) {
  listener_result out;
  out.listeners = receivers_.size();
  int64_t first_ok = std::numeric_limits<int64_t>::max();
  int64_t last_receipt = 0;
  std::vector<double> latencies;
  // Per listener: the first receipt of each of its events.
  std::vector<std::vector<int64_t>> first_receipt(receivers_.size(),
                                                  std::vector<int64_t>(clock.size(), 0));
  for (size_t l = 0; l < receivers_.size(); ++l) {
    bool ok = healthy(l);
    if (!ok)
      ++out.stalled;
    for (auto& r : receivers_[l]->receipts()) {
      if (!ok)
        ++out.stalled_requests;
      auto k = clock.index_of(r.event_id);
      if (k < 0 || listener_of[static_cast<size_t>(k)] != static_cast<int>(l)) {
        ++out.foreign;
        continue;
      }
      auto& first = first_receipt[l][static_cast<size_t>(k)];
      if (first != 0) {
        out.repeated += ok;
        continue;
      }
      first = r.at_ns;
    }
  }
  for (size_t k = 0; k < clock.size(); ++k) {
    auto l = listener_of[k];
    if (l < 0 || !clock.accepted(k))
      continue;
    auto ok_at = clock.accepted_at(k);
    first_ok = std::min(first_ok, ok_at);
    if (!healthy(static_cast<size_t>(l)))
      continue;
    ++out.expected;
    auto got = first_receipt[static_cast<size_t>(l)][k];
    if (got == 0)
      continue;
    ++out.delivered;
    last_receipt = std::max(last_receipt, got);
    // A receipt can beat the tool's reading of the OK (the relay answers and
    // delivers in parallel): the latency is then negative, and kept.
    latencies.push_back(static_cast<double>(got - ok_at) / 1e6);
  }
  out.missed = out.expected - out.delivered;
  if (out.delivered && last_receipt > first_ok) {
    out.span_s = static_cast<double>(last_receipt - first_ok) / 1e9;
    out.per_s = static_cast<double>(out.delivered) / out.span_s;
  }
  out.latency_ms = summarize_latency(latencies);
  return out;
}

}  // namespace waggle::bench
