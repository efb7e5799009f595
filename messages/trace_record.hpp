#pragma once

// Reading a recorded trace file (docs/traces.md): the header line, then one
// record per line. A trace is input from outside the process (a file an
// operator hands to `waggle replay`), so reading refuses what no node
// writes (lines nested deeper than any message, sequence numbers that do not
// increase) with a line number, and never trusts a field's type. What the
// records mean is the replay's business (actors/replay/).

#include <cstdint>
#include <istream>
#include <string>
#include <vector>

#include <rapidjson/document.h>

namespace waggle {

struct trace_record {
  uint64_t seq = 0;
  std::string actor;
  std::string kind;
  std::string type;
  std::string text;    // frame_in / frame_out
  std::string msg;     // trace_codec JSON, re-rendered compactly
  std::string what;    // reading
  std::string value;   // reading, as text
  int64_t community = 0;
  std::string host;
  std::string policy;       // open: the community's policy then ("" in older traces: open)
  std::string auth_pubkey;  // http_in
  std::string id;           // ingest_in, a connection's reply_in of ingest's answer: the event's id
  std::string from;         // reader_in: who sent the read
  uint64_t n = 0;           // bus_out, bus_reply, cluster_out, cluster_reply: the request number
  int64_t close_code = 0;   // close_out
  std::string close_reason; // close_out
};

struct trace_file {
  rapidjson::Document header;  // line 1, an object with "waggle_trace"
  std::vector<trace_record> records;
  bool torn_tail = false;  // the last line was torn (a node killed mid-write) and left out
  std::string error;       // not empty: the file is not a trace, and why
};

// Deeper than any message of messages/ nests; deeper lines are refused
// before parsing (rendering a parsed value recurses).
inline constexpr int trace_max_depth = 32;

trace_file read_trace(std::istream& in);

// A field of a record or of the header, whatever JSON type it has: a string
// as itself, an integer in decimal, anything else rendered as JSON; missing
// is empty.
std::string trace_string_field(const rapidjson::Value& obj, const char* key);
int64_t trace_int_field(const rapidjson::Value& obj, const char* key, int64_t fallback = 0);
bool trace_bool_field(const rapidjson::Value& obj, const char* key, bool fallback);

}  // namespace waggle
