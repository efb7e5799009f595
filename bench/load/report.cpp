#include "bench/load/report.hpp"

#include <sys/utsname.h>

#include <algorithm>
#include <ctime>
#include <fstream>
#include <functional>
#include <sstream>
#include <thread>

#include <rapidjson/document.h>
#include <rapidjson/prettywriter.h>
#include <rapidjson/stringbuffer.h>

#include "bench/load/json_fields.hpp"

namespace waggle::bench {

namespace {

using namespace json;

}  // namespace

std::string machine_description() {
  std::string model;
  std::ifstream cpuinfo("/proc/cpuinfo");
  for (std::string line; std::getline(cpuinfo, line);)
    if (line.rfind("model name", 0) == 0) {
      model = line.substr(line.find(':') + 2);
      break;
    }
  long long mem_kb = 0;
  std::ifstream meminfo("/proc/meminfo");
  for (std::string line; std::getline(meminfo, line);)
    if (line.rfind("MemTotal:", 0) == 0)
      mem_kb = std::stoll(line.substr(9));
  utsname u{};
  uname(&u);
  return (model.empty() ? std::string{"unknown CPU"} : model) + ", " +
         std::to_string(std::thread::hardware_concurrency()) + " CPUs, " +
         std::to_string(mem_kb / 1024 / 1024) + " GiB, Linux " + u.release;
}

std::string utc_now() {
  auto t = std::time(nullptr);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&t));
  return buf;
}

std::string to_json(const run_result& r) {
  rapidjson::StringBuffer buf;
  writer w(buf);
  w.SetMaxDecimalPlaces(3);
  auto& o = r.options;
  w.StartObject();
  report_header(w, o.label, r.started_at);
  w.Key("settings");
  w.StartObject();
  field(w, "workload", std::string{to_string(o.kind)});
  field(w, "url", o.url);
  if (o.urls.size() > 1 || o.subscriber_urls != o.urls) {
    std::string all, subs;
    for (auto& u : o.urls)
      all += (all.empty() ? "" : ",") + u;
    for (auto& u : o.subscriber_urls)
      subs += (subs.empty() ? "" : ",") + u;
    field(w, "urls", all);
    field(w, "subscriber_urls", subs);
  }
  field(w, "connections", o.connections);
  field(w, "in_flight", o.in_flight);
  field(w, "rate", o.rate);
  field(w, "duration_s", o.duration);
  field(w, "channels", o.channels);
  field(w, "mention_share", o.mention_share);
  field(w, "subscribers", o.subscribers);
  field(w, "content_bytes", o.content_bytes);
  field(w, "threads", o.threads);
  if (o.kind == workload::history) {
    if (o.until_age >= 0)
      field(w, "until_age_s", o.until_age);
    if (!o.search.empty()) {
      std::string words;
      for (auto& x : o.search)
        words += (words.empty() ? "" : ",") + x;
      field(w, "search", words);
    }
  }
  if (o.listeners()) {
    field(w, "listeners", o.listener_ports.size());
    field(w, "stalled_listeners", o.stalled_listeners);
    field(w, "mentions", o.mentions);
    if (o.kind == workload::listener_latency) {
      field(w, "gap_min_s", o.gap_min);
      field(w, "gap_max_s", o.gap_max);
    }
  }
  w.EndObject();
  w.Key("results");
  w.StartObject();
  field(w, "connections_open", r.connections_open);
  field(w, "sent", r.outcomes.sent);
  field(w, "accepted", r.outcomes.accepted);
  field(w, "duplicate", r.outcomes.duplicate);
  field(w, "rejected", r.outcomes.rejected);
  w.Key("rejected_by_reason");
  w.StartObject();
  for (auto& [reason, n] : r.outcomes.rejected_by_reason)
    field(w, reason.c_str(), n);
  w.EndObject();
  field(w, "unanswered", r.unanswered);
  field(w, "elapsed_s", r.elapsed_s);
  field(w, "per_s", r.per_s);
  latency(w, "latency_ms", r.ack_ms);
  if (o.kind == workload::history)
    field(w, "history_events", r.history_events);
  if (r.subscribers > 0) {
    w.Key("fanout");
    w.StartObject();
    field(w, "subscribers", r.subscribers);
    field(w, "expected", r.fanout_expected);
    field(w, "delivered", r.fanout_delivered);
    field(w, "missed", r.fanout_missed);
    field(w, "duplicates", r.fanout_duplicates);
    latency(w, "latency_ms", r.delivery_ms);
    latency(w, "after_ok_ms", r.delivery_after_ok_ms);
    w.EndObject();
  }
  if (!r.cpu.empty()) {
    w.Key("cpu");
    w.StartObject();
    for (auto& [name, cores] : r.cpu)
      field(w, name.c_str(), cores);
    w.EndObject();
  }
  if (r.listeners) {
    auto& l = *r.listeners;
    w.Key("listeners");
    w.StartObject();
    field(w, "listeners", l.listeners);
    field(w, "stalled", l.stalled);
    field(w, "expected", l.expected);
    field(w, "delivered", l.delivered);
    field(w, "missed", l.missed);
    field(w, "repeated", l.repeated);
    field(w, "stalled_requests", l.stalled_requests);
    field(w, "foreign", l.foreign);
    field(w, "span_s", l.span_s);
    field(w, "per_s", l.per_s);
    latency(w, "latency_ms", l.latency_ms);
    w.EndObject();
  }
  if (r.commits) {
    w.Key("commits");
    w.StartObject();
    field(w, "window_s", r.commits->window_s);
    field(w, "gross", static_cast<double>(r.commits->gross));
    field(w, "idle_control", static_cast<double>(r.commits->idle_control));
    field(w, "net", static_cast<double>(r.commits->net));
    w.Key("per_message");
    w.Double(r.commits->per_message);
    w.EndObject();
  }
  if (r.relay_rss_mib)
    field(w, "relay_rss_mib", *r.relay_rss_mib);
  if (r.relay_peak_rss_mib)
    field(w, "relay_peak_rss_mib", *r.relay_peak_rss_mib);
  w.EndObject();
  w.Key("errors");
  w.StartArray();
  for (auto& e : r.errors)
    w.String(e);
  w.EndArray();
  w.EndObject();
  return std::string{buf.GetString(), buf.GetSize()} + "\n";
}

std::string to_markdown(const run_result& r) {
  auto& o = r.options;
  bool history = o.kind == workload::history;
  std::ostringstream md;
  md << "| " << (o.label.empty() ? to_string(o.kind) : o.label) << " | value |\n|---|---|\n";
  md << "| workload | " << to_string(o.kind) << ", " << o.connections << " connection(s), "
     << (o.rate > 0 ? fixed(o.rate, 0) + "/s fixed rate" : std::to_string(o.in_flight) + " in flight")
     << ", " << fixed(o.duration, 0) << " s |\n";
  md << "| " << (history ? "REQs" : "events") << " sent / accepted / rejected | " << r.outcomes.sent
     << " / " << r.outcomes.accepted << " / " << r.outcomes.rejected << " |\n";
  for (auto& [reason, n] : r.outcomes.rejected_by_reason)
    md << "| rejected `" << reason << ":` | " << n << " |\n";
  if (r.unanswered)
    md << "| unanswered | " << r.unanswered << " |\n";
  md << "| " << (history ? "REQs/s" : "accepted events/s") << " | " << fixed(r.per_s, 0) << " |\n";
  md << "| " << (history ? "REQ to EOSE" : "ack latency") << " p50 / p90 / p99 / max (ms) | "
     << fixed(r.ack_ms.p50, 2) << " / " << fixed(r.ack_ms.p90, 2) << " / " << fixed(r.ack_ms.p99, 2)
     << " / " << fixed(r.ack_ms.max, 2) << " |\n";
  if (history)
    md << "| events returned | " << r.history_events << " |\n";
  if (r.subscribers > 0) {
    md << "| fanout: subscribers, expected, delivered, missed | " << r.subscribers << ", "
       << r.fanout_expected << ", " << r.fanout_delivered << ", " << r.fanout_missed << " |\n";
    md << "| fanout delivery p50 / p99 / max (ms) | " << fixed(r.delivery_ms.p50, 2) << " / "
       << fixed(r.delivery_ms.p99, 2) << " / " << fixed(r.delivery_ms.max, 2) << " |\n";
    md << "| fanout delivery after the publisher's OK p50 / p99 / max (ms) | "
       << fixed(r.delivery_after_ok_ms.p50, 2) << " / " << fixed(r.delivery_after_ok_ms.p99, 2)
       << " / " << fixed(r.delivery_after_ok_ms.max, 2) << " |\n";
  }
  if (r.listeners) {
    auto& l = *r.listeners;
    md << "| listeners: healthy + stalled | " << l.listeners - l.stalled << " + " << l.stalled
       << " |\n";
    md << "| listener deliveries (healthy): expected, delivered, missed, repeated | " << l.expected
       << ", " << l.delivered << ", " << l.missed << ", " << l.repeated << " |\n";
    md << "| OK to listener receipt p50 / p90 / p99 / max (ms) | " << fixed(l.latency_ms.p50, 2)
       << " / " << fixed(l.latency_ms.p90, 2) << " / " << fixed(l.latency_ms.p99, 2) << " / "
       << fixed(l.latency_ms.max, 2) << " |\n";
    md << "| healthy deliveries/s (first OK to last receipt, s) | " << fixed(l.per_s, 1) << " ("
       << fixed(l.span_s, 2) << ") |\n";
    if (l.stalled)
      md << "| requests the stalled listeners read | " << l.stalled_requests << " |\n";
  }
  if (r.commits)
    md << "| commits: gross - idle = net; per accepted message | " << r.commits->gross << " - "
       << r.commits->idle_control << " = " << r.commits->net << "; "
       << fixed(r.commits->per_message, 3) << " |\n";
  if (!r.cpu.empty()) {
    md << "| CPU over the window (cores; machine: busy share) |";
    for (auto& [name, cores] : r.cpu)
      md << " " << name << " " << fixed(cores, 2);
    md << " |\n";
  }
  if (r.relay_rss_mib)
    md << "| relay RSS (MiB) | " << fixed(*r.relay_rss_mib, 1) << " |\n";
  if (r.connections_open)
    md << "| connections open | " << r.connections_open << " |\n";
  for (auto& e : r.errors)
    md << "| error | " << e << " |\n";
  return md.str();
}

// --- summarize ------------------------------------------------------------------

namespace {

// Every numeric leaf under `v`, by slash-separated path.
void numeric_leaves(const rapidjson::Value& v, const std::string& path,
                    std::map<std::string, std::vector<double>>& out) {
  if (v.IsNumber()) {
    out[path].push_back(v.GetDouble());
  } else if (v.IsObject()) {
    for (auto& m : v.GetObject())
      numeric_leaves(m.value, path.empty() ? m.name.GetString() : path + "/" + m.name.GetString(),
                     out);
  }
}

// Writes `values` back in the shape of `shape`, each leaf the median.
void write_medians(writer& w, const rapidjson::Value& shape, const std::string& path,
                   const std::map<std::string, std::vector<double>>& values) {
  if (shape.IsNumber()) {
    auto i = values.find(path);
    w.Double(i == values.end() ? 0 : median(i->second));
  } else if (shape.IsObject()) {
    w.StartObject();
    for (auto& m : shape.GetObject()) {
      w.Key(m.name.GetString());
      write_medians(w, m.value, path.empty() ? m.name.GetString() : path + "/" + m.name.GetString(),
                    values);
    }
    w.EndObject();
  } else {
    shape.Accept(w);
  }
}

}  // namespace

summary summarize_runs(const std::vector<std::string>& json_texts, const std::string& label) {
  summary s;
  std::vector<rapidjson::Document> docs(json_texts.size());
  std::map<std::string, std::vector<double>> values;
  for (size_t i = 0; i < json_texts.size(); ++i) {
    docs[i].Parse(json_texts[i].c_str());
    if (docs[i].HasParseError() || !docs[i].IsObject() || !docs[i].HasMember("results") ||
        !docs[i].HasMember("settings")) {
      s.error = "input " + std::to_string(i + 1) + " is not a waggle-load result";
      return s;
    }
    numeric_leaves(docs[i]["results"], "", values);
  }
  auto& first = docs.front();
  rapidjson::StringBuffer buf;
  writer w(buf);
  w.SetMaxDecimalPlaces(3);
  w.StartObject();
  field(w, "tool", std::string{"waggle-load summarize"});
  field(w, "label", label.empty() && first.HasMember("label") ? first["label"].GetString() : label);
  field(w, "runs", docs.size());
  if (first.HasMember("machine"))
    field(w, "machine", std::string{first["machine"].GetString()});
  w.Key("settings");
  first["settings"].Accept(w);
  w.Key("results_median");
  write_medians(w, first["results"], "", values);
  w.Key("results_range");
  w.StartObject();
  for (auto& [path, v] : values) {
    w.Key(path.c_str());
    w.StartArray();
    w.Double(*std::min_element(v.begin(), v.end()));
    w.Double(*std::max_element(v.begin(), v.end()));
    w.EndArray();
  }
  w.EndObject();
  w.EndObject();
  s.json = std::string{buf.GetString(), buf.GetSize()} + "\n";

  std::ostringstream md;
  md << "| " << (label.empty() ? "metric" : label) << " (" << docs.size()
     << " runs) | median | min | max |\n|---|---|---|---|\n";
  for (auto& [path, v] : values)
    md << "| " << path << " | " << fixed(median(v), 3) << " | "
       << fixed(*std::min_element(v.begin(), v.end()), 3) << " | "
       << fixed(*std::max_element(v.begin(), v.end()), 3) << " |\n";
  s.markdown = md.str();
  for (auto& [path, v] : values)
    s.medians[path] = median(v);
  return s;
}

}  // namespace waggle::bench
