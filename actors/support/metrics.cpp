#include "actors/support/metrics.hpp"

#include "actors/support/log.hpp"
#include "db/event_store.hpp"

#include <sstream>
#include <utility>

namespace waggle {

histogram::histogram(std::vector<double> bounds)
  : bounds_(std::move(bounds)),
    buckets_(new std::atomic<uint64_t>[bounds_.size() + 1]) {
  for (size_t i = 0; i <= bounds_.size(); ++i)
    buckets_[i] = 0;
}

void histogram::observe(double value) {
  size_t i = 0;
  while (i < bounds_.size() && value > bounds_[i])
    ++i;
  buckets_[i].fetch_add(1, std::memory_order_relaxed);
  count_.fetch_add(1, std::memory_order_relaxed);
  sum_micros_.fetch_add(static_cast<uint64_t>(value * 1e6), std::memory_order_relaxed);
}

std::string histogram::render(const std::string& name, const std::string& help) const {
  std::ostringstream out;
  out << "# HELP " << name << ' ' << help << "\n# TYPE " << name << " histogram\n";
  uint64_t cumulative = 0;
  for (size_t i = 0; i < bounds_.size(); ++i) {
    cumulative += buckets_[i].load(std::memory_order_relaxed);
    out << name << "_bucket{le=\"" << bounds_[i] << "\"} " << cumulative << '\n';
  }
  cumulative += buckets_[bounds_.size()].load(std::memory_order_relaxed);
  out << name << "_bucket{le=\"+Inf\"} " << cumulative << '\n';
  out << name << "_sum " << static_cast<double>(sum_micros_.load()) / 1e6 << '\n';
  out << name << "_count " << count_.load() << '\n';
  return out.str();
}

metrics::metrics()
  : ingest_batch_size({1, 2, 4, 8, 16, 32, 64, 128, 256, 512}),
    commit_latency({0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1}),
    ack_latency({0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1}) {
}

void metrics::count_rejected(const std::string& reason) {
  std::lock_guard guard{mtx_};
  ++rejected_[reason];
}

void metrics::count_refused(std::string_view reason) {
  uint64_t to_log = 0;
  {
    std::lock_guard guard{mtx_};
    auto it = refused_.find(reason);
    if (it == refused_.end())
      it = refused_.emplace(std::string{reason}, 0).first;
    ++it->second;
    auto lg = refusal_log_.find(reason);
    if (lg == refusal_log_.end())
      lg = refusal_log_.emplace(std::string{reason}, refusal_log{}).first;
    ++lg->second.unlogged;
    auto now = std::chrono::steady_clock::now();
    if (lg->second.last == std::chrono::steady_clock::time_point{}
        || now - lg->second.last >= std::chrono::seconds(1)) {
      to_log = std::exchange(lg->second.unlogged, 0);
      lg->second.last = now;
    }
  }
  if (to_log > 0)
    log::info("refusals", "refused",
              {{"reason", std::string{reason}}, {"count", std::to_string(to_log)}});
}

void metrics::count(const answer& a) {
  if (a.metric == "accepted")
    ++events_accepted;
  else if (a.metric == "duplicate")
    ++events_duplicate;
  else
    count_rejected(std::string{a.metric});
}

void metrics::count_delivery(std::string_view queue, std::string_view outcome, uint64_t n) {
  std::lock_guard guard{mtx_};
  deliveries_[{std::string{queue}, std::string{outcome}}] += n;
}

void metrics::count_push_jobs(std::string_view result, uint64_t n) {
  if (n == 0)
    return;
  std::lock_guard guard{mtx_};
  push_jobs_[std::string{result}] += n;
}

void metrics::count_push_wakes(std::string_view outcome, uint64_t n) {
  if (n == 0)
    return;
  std::lock_guard guard{mtx_};
  push_wakes_[std::string{outcome}] += n;
}

std::string metrics::render() const {
  std::ostringstream out;
  auto gauge = [&](const char* name, const char* help, int64_t v) {
    out << "# HELP " << name << ' ' << help << "\n# TYPE " << name << " gauge\n"
        << name << ' ' << v << '\n';
  };
  auto counter = [&](const char* name, const char* help, uint64_t v) {
    out << "# HELP " << name << ' ' << help << "\n# TYPE " << name << " counter\n"
        << name << ' ' << v << '\n';
  };
  gauge("waggle_connections", "Open WebSocket connections.", connections.load());
  gauge("waggle_live_subscriptions", "Live REQ subscriptions.", live_subscriptions.load());
  gauge("waggle_http_submits_in_flight", "POST /events being answered.",
        http_submits_in_flight.load());
  counter("waggle_http_submits_refused_total",
          "POST /events answered 503 over the node's or the community's cap of ones in flight.",
          http_submits_refused.load());
  gauge("waggle_roster_actors", "Live roster actors (channels changed recently).",
        roster_actors.load());
  counter("waggle_rosters_published_total",
          "NIP-29 roster publications (39000-39003) this node committed (clustered: the "
          "channels it owns).",
          rosters_published.load());
  counter("waggle_events_accepted_total", "Events stored (or fanned out, if ephemeral).",
          events_accepted.load());
  counter("waggle_events_duplicate_total", "Events answered as duplicates.",
          events_duplicate.load());
  counter("waggle_ingest_batches_total", "Committed ingest transactions.", ingest_batches.load());
  counter("waggle_expired_events_reaped_total",
          "Expired events (NIP-40) deleted by the expiration reaper.",
          expired_events_reaped.load());
  gauge("waggle_reads_queued", "Reads waiting in the reader pool for a session.",
        reads_queued.load());
  gauge("waggle_readers_busy", "Reader sessions running a read.", readers_busy.load());
  counter("waggle_history_pages_total",
          "Pages of REQ histories read after their first, each once the socket had sent the last.",
          history_pages.load());
  counter("waggle_reads_withdrawn_total",
          "Queued reads dropped before they ran because their caller gave up.",
          reads_withdrawn.load());
  counter("waggle_channel_ttl_refresh_failures_total",
          "Batches whose channel TTL refresh failed (events kept; see the server log).",
          db::ttl_refresh_failures());
  out << "# HELP waggle_events_rejected_total Events rejected, by reason.\n"
         "# TYPE waggle_events_rejected_total counter\n";
  {
    std::lock_guard guard{mtx_};
    for (auto& [reason, n] : rejected_)
      out << "waggle_events_rejected_total{reason=\"" << reason << "\"} " << n << '\n';
  }
  out << "# HELP waggle_refusals_total Requests, frames and connections refused by a limit, by reason.\n"
         "# TYPE waggle_refusals_total counter\n";
  {
    std::lock_guard guard{mtx_};
    for (auto& [reason, n] : refused_)
      out << "waggle_refusals_total{reason=\"" << reason << "\"} " << n << '\n';
  }
  render_replicas(out);
  gauge("waggle_delivery_in_flight", "Delivery slots with a request out.",
        deliveries_in_flight.load());
  gauge("waggle_listener_up", "1 while the LISTEN connection's probe arrives (docs/delivery.md).",
        listener_up.load());
  gauge("waggle_delivery_queue_age_milliseconds",
        "Age of the oldest row in the latest delivery claim.", delivery_queue_age_ms.load());
  out << "# HELP waggle_deliveries_total Delivery attempts, by queue and outcome.\n"
         "# TYPE waggle_deliveries_total counter\n";
  {
    std::lock_guard guard{mtx_};
    for (auto& [key, n] : deliveries_)
      out << "waggle_deliveries_total{queue=\"" << key.first << "\",outcome=\"" << key.second
          << "\"} " << n << '\n';
  }
  gauge("waggle_push_match_queue_age_milliseconds",
        "Age of the oldest job in the push matcher's latest batch.", push_match_queue_age_ms.load());
  out << "# HELP waggle_push_match_jobs_total Push match jobs, by result.\n"
         "# TYPE waggle_push_match_jobs_total counter\n";
  {
    std::lock_guard guard{mtx_};
    for (auto& [result, n] : push_jobs_)
      out << "waggle_push_match_jobs_total{result=\"" << result << "\"} " << n << '\n';
  }
  out << "# HELP waggle_push_wakes_total Push wakes the matcher wrote, by outcome.\n"
         "# TYPE waggle_push_wakes_total counter\n";
  {
    std::lock_guard guard{mtx_};
    for (auto& [outcome, n] : push_wakes_)
      out << "waggle_push_wakes_total{outcome=\"" << outcome << "\"} " << n << '\n';
  }
  bus.render(out);
  out << ingest_batch_size.render("waggle_ingest_batch_size", "Events per ingest transaction.");
  out << commit_latency.render("waggle_commit_seconds", "Ingest transaction latency.");
  out << ack_latency.render("waggle_ack_seconds", "EVENT frame to OK latency.");
  return out.str();
}

}  // namespace waggle
