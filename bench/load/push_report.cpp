// The push workload's accounting and its JSON and markdown (push_run.hpp).

#include <cstdio>
#include <set>
#include <sstream>
#include <unordered_map>

#include <rapidjson/prettywriter.h>
#include <rapidjson/stringbuffer.h>

#include "bench/load/json_fields.hpp"
#include "bench/load/push_run.hpp"

namespace waggle::bench {

namespace {

using namespace json;

}  // namespace

// The key of a step in the JSON ("100", "2.5"): `summarize --get steps/100/...`.
std::string rate_key(double rate) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", rate);
  return buf;
}

bool push_result::clean() const {
  if (!errors.empty() || wakes_foreign || wakes_malformed)
    return false;
  for (auto& s : steps)
    if (s.outcomes.rejected || s.outcomes.duplicate || s.unanswered || s.wakes_missing ||
        s.wake_duplicates || s.wakes_unexpected || (s.queues_checked && !s.queues_drained))
      return false;
  return true;
}

size_t owed_received(const std::vector<mock_push_gateway::wake>& wakes, const publish_clock& clock) {
  std::set<int64_t> seen;
  for (auto& w : wakes) {
    auto k = clock.index_of(w.event_id);
    if (k >= 0 && clock.accepted(static_cast<size_t>(k)))
      seen.insert(k);
  }
  return seen.size();
}

void tally_wakes(const std::vector<mock_push_gateway::wake>& wakes, const std::string& grant,
                 const std::string& warmup_id, const std::vector<push_step_book>& books,
                 push_result& out) {
  struct first_wake {
    int64_t at_ns;
    std::string request_id;
  };
  // Per step, the first wake of each of its events.
  std::vector<std::unordered_map<int64_t, first_wake>> firsts(books.size());
  out.gateway_requests = wakes.size();
  for (auto& w : wakes) {
    if (!w.parsed || !w.has_nostr_authorization() || w.delivery_id != w.request_id ||
        (!grant.empty() && w.endpoint_grant != grant)) {
      ++out.wakes_malformed;
      continue;
    }
    if (!warmup_id.empty() && w.event_id == warmup_id) {
      ++out.warmup_wakes;
      continue;
    }
    bool found = false;
    for (size_t s = 0; s < books.size() && !found; ++s) {
      auto k = books[s].clock->index_of(w.event_id);
      if (k < 0)
        continue;
      found = true;
      auto& step = out.steps[s];
      if (!books[s].wakes_owed || !books[s].clock->accepted(static_cast<size_t>(k))) {
        ++step.wakes_unexpected;
        continue;
      }
      auto [at, fresh] = firsts[s].try_emplace(k, first_wake{w.at_ns, w.request_id});
      if (!fresh) {
        ++step.wake_duplicates;
        step.wake_retries += at->second.request_id == w.request_id;
      }
    }
    out.wakes_foreign += !found;
  }
  for (size_t s = 0; s < books.size(); ++s) {
    auto& step = out.steps[s];
    auto& clock = *books[s].clock;
    std::vector<double> latencies;
    step.wakes_owed = step.wakes_received = 0;
    for (size_t k = 0; books[s].wakes_owed && k < clock.size(); ++k) {
      if (!clock.accepted(k))
        continue;
      ++step.wakes_owed;
      auto f = firsts[s].find(static_cast<int64_t>(k));
      if (f == firsts[s].end())
        continue;
      ++step.wakes_received;
      // A wake can beat the tool's reading of the OK; the latency is then
      // negative, and kept.
      latencies.push_back(static_cast<double>(f->second.at_ns - clock.accepted_at(k)) / 1e6);
    }
    step.wakes_missing = step.wakes_owed - step.wakes_received;
    step.wake_ms = summarize_latency(latencies);
  }
}

std::string to_json(const push_result& r) {
  rapidjson::StringBuffer buf;
  writer w(buf);
  w.SetMaxDecimalPlaces(3);
  auto& o = r.options;
  w.StartObject();
  report_header(w, o.label, r.started_at);
  w.Key("settings");
  w.StartObject();
  field(w, "workload", std::string{"push"});
  field(w, "scenario", o.push_scenario);
  field(w, "url", o.url);
  field(w, "gateway_url", r.gateway_url);
  w.Key("rates");
  w.StartArray();
  for (auto rate : o.push_rates)
    w.Double(rate);
  w.EndArray();
  field(w, "step_s", o.step_seconds);
  field(w, "drain_wait_s", o.drain_wait);
  field(w, "content_bytes", o.content_bytes);
  field(w, "channel", r.channel);
  w.EndObject();
  w.Key("results");
  w.StartObject();
  field(w, "lease_accepted", size_t{r.lease_accepted});
  field(w, "gateway_requests", r.gateway_requests);
  field(w, "warmup_wakes", r.warmup_wakes);
  field(w, "wakes_foreign", r.wakes_foreign);
  field(w, "wakes_malformed", r.wakes_malformed);
  if (r.idle) {
    w.Key("idle");
    w.StartObject();
    field(w, "window_s", r.idle->window_s);
    field(w, "commits", static_cast<double>(r.idle->commits));
    field(w, "commits_per_s", r.idle->per_s);
    w.EndObject();
  }
  w.Key("steps");
  w.StartObject();
  for (auto& s : r.steps) {
    w.Key(rate_key(s.rate).c_str());
    w.StartObject();
    field(w, "rate", s.rate);
    field(w, "seconds", s.seconds);
    field(w, "sent", s.outcomes.sent);
    field(w, "accepted", s.outcomes.accepted);
    field(w, "duplicate", s.outcomes.duplicate);
    field(w, "rejected", s.outcomes.rejected);
    field(w, "unanswered", s.unanswered);
    latency(w, "ack_ms", s.ack_ms);
    w.Key("wakes");
    w.StartObject();
    field(w, "owed", s.wakes_owed);
    field(w, "received", s.wakes_received);
    field(w, "missing", s.wakes_missing);
    field(w, "duplicates", s.wake_duplicates);
    field(w, "retries", s.wake_retries);
    field(w, "unexpected", s.wakes_unexpected);
    field(w, "shortfall_at_drain", s.shortfall_at_drain);
    field(w, "drain_s", s.drain_s);
    latency(w, "latency_ms", s.wake_ms);
    w.EndObject();
    if (s.queues_checked) {
      w.Key("queues");
      w.StartObject();
      field(w, "drained", size_t{s.queues_drained});
      field(w, "match_queue_left", static_cast<double>(s.match_queue_left));
      field(w, "outbox_left", static_cast<double>(s.outbox_left));
      w.EndObject();
    }
    if (s.commits) {
      w.Key("commits");
      w.StartObject();
      field(w, "window_s", s.commits->window_s);
      field(w, "gross", static_cast<double>(s.commits->gross));
      field(w, "idle_control", static_cast<double>(s.commits->idle_control));
      field(w, "net", static_cast<double>(s.commits->net));
      field(w, "per_message", s.commits->per_message);
      w.EndObject();
    }
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

std::string to_markdown(const push_result& r) {
  auto& o = r.options;
  std::ostringstream md;
  md << "push scenario " << o.push_scenario << (o.label.empty() ? "" : " (" + o.label + ")")
     << ": steps of " << fixed(o.step_seconds, 0) << " s, gateway " << r.gateway_url;
  if (o.push_scenario == "B")
    md << ", lease " << (r.lease_accepted ? "accepted" : "NOT accepted");
  md << "\n\n";
  if (r.idle)
    md << "Idle control: " << r.idle->commits << " commits in " << fixed(r.idle->window_s, 1)
       << " s = " << fixed(r.idle->per_s, 3) << " commits/s\n\n";
  if (!r.steps.empty()) {
    md << "| msgs/s | commits/msg | ack p50 / p99 (ms) | wake p50 / p99 (ms) | accepted / rejected "
          "| wakes owed / received / dup / unexpected | drained |\n";
    md << "|---|---|---|---|---|---|---|\n";
    for (auto& s : r.steps) {
      md << "| " << rate_key(s.rate) << " | "
         << (s.commits ? fixed(s.commits->per_message, 3) : std::string{"-"}) << " | "
         << fixed(s.ack_ms.p50, 2) << " / " << fixed(s.ack_ms.p99, 2) << " | "
         << (s.wake_ms.count ? fixed(s.wake_ms.p50, 1) + " / " + fixed(s.wake_ms.p99, 1)
                             : std::string{"-"})
         << " | " << s.outcomes.accepted << " / " << s.outcomes.rejected << " | " << s.wakes_owed
         << " / " << s.wakes_received << " / " << s.wake_duplicates << " / " << s.wakes_unexpected
         << " | "
         << (s.queues_checked ? (s.queues_drained ? "yes" : "NO") : "wakes only")
         << (s.shortfall_at_drain ? " (short " + std::to_string(s.shortfall_at_drain) + ")" : "")
         << " |\n";
    }
    md << "\n";
  }
  md << "Gateway requests: " << r.gateway_requests << " (warm-up " << r.warmup_wakes
     << ", foreign " << r.wakes_foreign << ", malformed " << r.wakes_malformed << ")\n";
  for (auto& e : r.errors)
    md << "\nerror: " << e;
  if (!r.errors.empty())
    md << "\n";
  return md.str();
}

}  // namespace waggle::bench
