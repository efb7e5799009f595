// The fanout sweep's knee and its JSON and markdown (sweep_run.hpp).

#include <sstream>

#include "bench/load/json_fields.hpp"
#include "bench/load/sweep_run.hpp"

namespace waggle::bench {

namespace {

using namespace json;

double share_of(const sweep_step_result& s) {
  return s.offered_per_s > 0 ? s.achieved_per_s / s.offered_per_s : 0;
}

}  // namespace

bool sweep_result::clean() const {
  if (!errors.empty())
    return false;
  for (auto& s : steps)
    if (s.outcomes.rejected || s.outcomes.duplicate || s.unanswered || s.missed || s.duplicates ||
        s.dropped || s.listening != s.subscribers)
      return false;
  return true;
}

std::optional<size_t> find_knee(const std::vector<sweep_step_result>& steps, double p99_ms,
                                double share, std::string& reason) {
  reason.clear();
  for (size_t i = 0; i < steps.size(); ++i) {
    auto& s = steps[i];
    std::string why;
    if (s.delivery_ms.count == 0)
      why = "nothing delivered";
    if (why.empty() && s.delivery_ms.p99 > p99_ms)
      why = "delivery p99 " + fixed(s.delivery_ms.p99, 1) + " ms > " + fixed(p99_ms, 1) + " ms";
    if (share_of(s) < share) {
      auto below = "deliveries/s " + fixed(s.achieved_per_s, 0) + " < " +
                   fixed(share * 100, 0) + " % of " + fixed(s.offered_per_s, 0) + " offered";
      why = why.empty() ? below : why + "; " + below;
    }
    if (!why.empty()) {
      reason = std::to_string(s.subscribers) + " subscribers: " + why;
      return i;
    }
  }
  return std::nullopt;
}

void tally_deliveries(const publish_clock& clock, const std::vector<const subscriber*>& listening,
                      sweep_step_result& step) {
  std::vector<double> after_ok;
  step.expected = step.delivered = 0;
  for (size_t k = 0; k < clock.size(); ++k) {
    if (!clock.accepted(k))
      continue;  // deliveries of events never acked neither count nor hide a miss
    for (auto* s : listening) {
      ++step.expected;
      if (auto at = s->received_at(k)) {
        ++step.delivered;
        after_ok.push_back(static_cast<double>(at - clock.accepted_at(k)) / 1e6);
      }
    }
  }
  step.missed = step.expected - step.delivered;
  step.after_ok_ms = summarize_latency(after_ok);
}

std::string to_json(const sweep_result& r) {
  rapidjson::StringBuffer buf;
  writer w(buf);
  w.SetMaxDecimalPlaces(3);
  auto& o = r.options;
  w.StartObject();
  report_header(w, o.label, r.started_at);
  w.Key("settings");
  w.StartObject();
  field(w, "workload", std::string{"fanout-sweep"});
  field(w, "url", o.url);
  w.Key("sweep");
  w.StartArray();
  for (auto n : o.sweep)
    w.Uint64(n);
  w.EndArray();
  field(w, "rate", o.rate);
  field(w, "step_s", o.step_seconds);
  field(w, "drain_wait_s", o.drain_wait);
  field(w, "content_bytes", o.content_bytes);
  field(w, "threads", o.threads);
  field(w, "receiver_threads", r.receiver_threads);
  field(w, "knee_p99_ms", o.knee_p99_ms);
  field(w, "knee_share", o.knee_share);
  w.EndObject();
  w.Key("results");
  w.StartObject();
  // 0 = no knee within the sweep.
  field(w, "knee_subscribers", r.knee ? r.steps[*r.knee].subscribers : size_t{0});
  field(w, "knee_reason", r.knee_reason);
  w.Key("steps");
  w.StartObject();
  for (auto& s : r.steps) {
    w.Key(std::to_string(s.subscribers).c_str());
    w.StartObject();
    field(w, "subscribers", s.subscribers);
    field(w, "listening", s.listening);
    field(w, "rate", s.rate);
    field(w, "seconds", s.seconds);
    field(w, "setup_s", s.setup_s);
    field(w, "sent", s.outcomes.sent);
    field(w, "accepted", s.outcomes.accepted);
    field(w, "duplicate", s.outcomes.duplicate);
    field(w, "rejected", s.outcomes.rejected);
    field(w, "unanswered", s.unanswered);
    latency(w, "ack_ms", s.ack_ms);
    w.Key("delivery");
    w.StartObject();
    field(w, "expected", s.expected);
    field(w, "delivered", s.delivered);
    field(w, "missed", s.missed);
    field(w, "duplicates", s.duplicates);
    field(w, "foreign", s.foreign);
    field(w, "dropped", s.dropped);
    latency(w, "latency_ms", s.delivery_ms);
    latency(w, "after_ok_ms", s.after_ok_ms);
    field(w, "offered_per_s", s.offered_per_s);
    field(w, "achieved_per_s", s.achieved_per_s);
    field(w, "achieved_share", share_of(s));
    field(w, "span_s", s.span_s);
    field(w, "drain_s", s.drain_s);
    field(w, "drain_cut", size_t{s.drain_cut});
    w.EndObject();
    w.Key("receivers");
    w.StartObject();
    field(w, "cpu_s", s.receiver_cpu_s);
    field(w, "busy", s.receiver_busy);
    field(w, "cpu_us_per_delivery",
          s.delivered ? s.receiver_cpu_s * 1e6 / static_cast<double>(s.delivered) : 0.0);
    w.EndObject();
    w.EndObject();
  }
  w.EndObject();
  w.EndObject();
  w.Key("errors");
  w.StartArray();
  for (auto& e : r.errors)
    w.String(e);
  w.EndArray();
  w.EndObject();
  return std::string{buf.GetString(), buf.GetSize()} + "\n";
}

std::string to_markdown(const sweep_result& r) {
  auto& o = r.options;
  std::ostringstream md;
  md << "fanout sweep" << (o.label.empty() ? "" : " (" + o.label + ")") << ": " << fixed(o.rate, 0)
     << " events/s on one channel, steps of " << fixed(o.step_seconds, 0) << " s, "
     << r.receiver_threads << " receiver thread(s)\n\n";
  md << "| subscribers | set-up (s) | delivery p50 / p99 / max (ms) | ack p50 / p99 (ms) "
        "| OK to receipt p50 / p99 (ms) | deliveries/s achieved / offered | missed / dup "
        "| receivers busy |\n";
  md << "|---|---|---|---|---|---|---|---|\n";
  for (auto& s : r.steps) {
    md << "| " << s.subscribers;
    if (s.listening != s.subscribers)
      md << " (" << s.listening << " listening)";
    md << " | " << fixed(s.setup_s, 1) << " | " << fixed(s.delivery_ms.p50, 2) << " / "
       << fixed(s.delivery_ms.p99, 2) << " / " << fixed(s.delivery_ms.max, 2) << " | "
       << fixed(s.ack_ms.p50, 2) << " / " << fixed(s.ack_ms.p99, 2) << " | "
       << fixed(s.after_ok_ms.p50, 2) << " / " << fixed(s.after_ok_ms.p99, 2) << " | "
       << fixed(s.achieved_per_s, 0) << " / " << fixed(s.offered_per_s, 0) << " ("
       << fixed(share_of(s) * 100, 0) << " %)" << (s.drain_cut ? ", drain cut" : "") << " | "
       << s.missed << " / " << s.duplicates << " | " << fixed(s.receiver_busy * 100, 0)
       << " % |\n";
  }
  md << "\nDelivery: the publisher's send to the subscriber's receipt (the write path and the "
        "fanout); OK to receipt: the fanout's share alone.\n";
  md << "\nKnee (delivery p99 > " << fixed(o.knee_p99_ms, 0) << " ms or deliveries/s < "
     << fixed(o.knee_share * 100, 0) << " % of offered): "
     << (r.knee ? r.knee_reason : std::string{"none within the sweep"}) << "\n";
  for (auto& e : r.errors)
    md << "\nerror: " << e;
  if (!r.errors.empty())
    md << "\n";
  return md.str();
}

}  // namespace waggle::bench
