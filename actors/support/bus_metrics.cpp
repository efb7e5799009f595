#include "actors/support/bus_metrics.hpp"

#include <ostream>

#include <caf/atom.hpp>
#include <caf/error.hpp>

#include "messages/bus.hpp"

namespace waggle {

void bus_metrics::count_refused(const caf::error& err) {
  std::string reason = err.category() == caf::atom("bus")
                         ? to_string(static_cast<bus_errc>(err.code()))
                         : "other";
  std::lock_guard guard{mtx_};
  ++refused_[reason];
}

void bus_metrics::count_dropped(std::string_view reason, uint64_t n) {
  std::lock_guard guard{mtx_};
  auto i = dropped_.find(reason);
  if (i == dropped_.end())
    dropped_.emplace(std::string{reason}, n);
  else
    i->second += n;
}

uint64_t bus_metrics::dropped(std::string_view reason) const {
  std::lock_guard guard{mtx_};
  auto i = dropped_.find(reason);
  return i == dropped_.end() ? 0 : i->second;
}

void bus_metrics::render(std::ostream& out) const {
  const std::string label = "{driver=\"" + driver + "\"}";
  auto one = [&](const char* name, const char* type, const char* help, auto value) {
    out << "# HELP " << name << ' ' << help << "\n# TYPE " << name << ' ' << type << '\n'
        << name << label << ' ' << value << '\n';
  };
  one("waggle_bus_published_total", "counter", "Messages the bus driver took.", published.load());
  one("waggle_bus_delivered_total", "counter", "Bus messages put in a local subscriber's mailbox.",
      delivered.load());
  one("waggle_bus_lagged_total", "counter", "Lag notices sent to bus subscribers.", lagged.load());
  one("waggle_bus_notifies_total", "counter", "NOTIFYs sent by the bus doorbell (postgres).",
      notifies.load());
  one("waggle_bus_fetch_pages_total", "counter", "Pages fetched from the bus table (postgres).",
      fetch_pages.load());
  one("waggle_bus_lag_milliseconds", "gauge",
      "Publish-to-fetch age of the newest fetched bus message (postgres).", lag_ms.load());
  one("waggle_bus_peers", "gauge", "Peers connected to this node's bus (caf: other nodes; nats: 1 while connected to its server).", peers.load());
  one("waggle_cluster_nodes", "gauge",
      "Live nodes in the cluster's registry, this one included (0 with the in-process bus).",
      cluster_nodes.load());
  one("waggle_bus_probes_sent_total", "counter", "Probes this node published to itself.",
      probes_sent.load());
  one("waggle_bus_probes_returned_total", "counter", "Probes back from the bus in time.",
      probes_returned.load());
  one("waggle_bus_probes_lost_total", "counter", "Probes not back by their deadline.",
      probes_lost.load());
  one("waggle_bus_probe_rtt_seconds", "gauge", "Round trip of the last returned probe.",
      static_cast<double>(probe_rtt_us.load()) / 1e6);
  one("waggle_bus_probe_rtt_seconds_sum", "counter", "Round trips of all returned probes.",
      static_cast<double>(probe_rtt_us_sum.load()) / 1e6);
  one("waggle_bus_pings_answered_total", "counter",
      "Pings (node or cluster-wide) this node answered.", pings_answered.load());
  std::lock_guard guard{mtx_};
  auto labelled = [&](const char* name, const char* help, const auto& counts) {
    out << "# HELP " << name << ' ' << help << "\n# TYPE " << name << " counter\n";
    for (const auto& [reason, n] : counts)
      out << name << "{driver=\"" << driver << "\",reason=\"" << reason << "\"} " << n << '\n';
  };
  labelled("waggle_bus_refused_total", "Bus publishes, subscribes and requests refused, by reason.",
           refused_);
  labelled("waggle_bus_dropped_total", "Bus messages dropped on their way, by reason.", dropped_);
}

}  // namespace waggle
