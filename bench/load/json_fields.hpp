#pragma once

// The JSON and number formatting the load tool's reports share
// (report.cpp, push_report.cpp).

#include <cstdio>
#include <string>

#include <rapidjson/prettywriter.h>
#include <rapidjson/stringbuffer.h>

#include "bench/load/stats.hpp"

namespace waggle::bench {
std::string machine_description();  // bench/load/report.cpp
}  // namespace waggle::bench

namespace waggle::bench::json {

using writer = rapidjson::PrettyWriter<rapidjson::StringBuffer>;

inline void field(writer& w, const char* name, double v) {
  w.Key(name);
  w.Double(v);
}
inline void field(writer& w, const char* name, size_t v) {
  w.Key(name);
  w.Uint64(v);
}
inline void field(writer& w, const char* name, const std::string& v) {
  w.Key(name);
  w.String(v);
}

inline void latency(writer& w, const char* name, const latency_summary& s) {
  w.Key(name);
  w.StartObject();
  field(w, "count", s.count);
  field(w, "p50", s.p50);
  field(w, "p90", s.p90);
  field(w, "p99", s.p99);
  field(w, "max", s.max);
  field(w, "mean", s.mean);
  w.EndObject();
}

// The fields every report opens with; the caller has started the object.
inline void report_header(writer& w, const std::string& label, const std::string& started_at) {
  field(w, "tool", std::string{"waggle-load"});
  field(w, "format", size_t{1});
  field(w, "label", label);
  field(w, "started_at", started_at);
  field(w, "machine", machine_description());
}

// `v` with `digits` decimals.
inline std::string fixed(double v, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

}  // namespace waggle::bench::json
