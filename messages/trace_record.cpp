#include "messages/trace_record.hpp"

#include <algorithm>
#include <optional>

#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

namespace waggle {

namespace {

std::string render(const rapidjson::Value& v) {
  rapidjson::StringBuffer buf;
  rapidjson::Writer<rapidjson::StringBuffer> w{buf};
  v.Accept(w);
  return {buf.GetString(), buf.GetSize()};
}

bool nests_too_deep(const std::string& line) {
  int depth = 0;
  bool in_string = false;
  for (size_t i = 0; i < line.size(); ++i) {
    char c = line[i];
    if (in_string) {
      if (c == '\\')
        ++i;
      else if (c == '"')
        in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > trace_max_depth)
        return true;
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return false;
}

std::optional<trace_record> parse_record(const rapidjson::Document& doc) {
  if (!doc.IsObject() || !doc.HasMember("seq") || !doc["seq"].IsUint64() || !doc.HasMember("kind"))
    return std::nullopt;
  trace_record r;
  r.seq = doc["seq"].GetUint64();
  r.actor = trace_string_field(doc, "actor");
  r.kind = trace_string_field(doc, "kind");
  r.type = trace_string_field(doc, "type");
  r.text = trace_string_field(doc, "text");
  if (r.kind == "close_out") {
    r.close_code = trace_int_field(doc, "code");
    r.close_reason = trace_string_field(doc, "reason");
  }
  if (auto m = doc.FindMember("msg"); m != doc.MemberEnd())
    r.msg = render(m->value);
  r.what = trace_string_field(doc, "what");
  r.value = trace_string_field(doc, "value");
  r.community = trace_int_field(doc, "community");
  r.host = trace_string_field(doc, "host");
  r.policy = trace_string_field(doc, "policy");
  r.auth_pubkey = trace_string_field(doc, "auth_pubkey");
  r.id = trace_string_field(doc, "id");
  r.from = trace_string_field(doc, "from");
  r.n = static_cast<uint64_t>(std::max<int64_t>(trace_int_field(doc, "n"), 0));
  return r;
}

}  // namespace

std::string trace_string_field(const rapidjson::Value& obj, const char* key) {
  auto i = obj.FindMember(key);
  if (i == obj.MemberEnd())
    return {};
  if (i->value.IsString())
    return {i->value.GetString(), i->value.GetStringLength()};
  if (i->value.IsInt64())
    return std::to_string(i->value.GetInt64());
  return render(i->value);
}

int64_t trace_int_field(const rapidjson::Value& obj, const char* key, int64_t fallback) {
  auto i = obj.FindMember(key);
  return i != obj.MemberEnd() && i->value.IsInt64() ? i->value.GetInt64() : fallback;
}

bool trace_bool_field(const rapidjson::Value& obj, const char* key, bool fallback) {
  auto i = obj.FindMember(key);
  return i != obj.MemberEnd() && i->value.IsBool() ? i->value.GetBool() : fallback;
}

trace_file read_trace(std::istream& in) {
  trace_file out;
  std::string line;
  size_t line_no = 0;
  auto fail = [&](std::string why) {
    out.error = std::move(why);
    out.records.clear();
    return std::move(out);
  };
  while (std::getline(in, line)) {
    ++line_no;
    if (line.empty())
      continue;
    if (nests_too_deep(line))
      return fail("line " + std::to_string(line_no) + " nests deeper than "
                  + std::to_string(trace_max_depth) + " levels");
    rapidjson::Document doc;
    doc.Parse<rapidjson::kParseIterativeFlag>(line.data(), line.size());
    if (line_no == 1) {
      if (doc.HasParseError() || !doc.IsObject() || !doc.HasMember("waggle_trace"))
        return fail("line 1 is not a waggle trace header");
      out.header = std::move(doc);
      continue;
    }
    auto r = doc.HasParseError() ? std::nullopt : parse_record(doc);
    if (!r) {
      // A node killed mid-write leaves a torn last line: the trace ends before it.
      if (in.peek() == std::char_traits<char>::eof() && doc.HasParseError()) {
        out.torn_tail = true;
        break;
      }
      return fail("line " + std::to_string(line_no) + " is not a trace record");
    }
    if (!out.records.empty() && r->seq <= out.records.back().seq)
      return fail("line " + std::to_string(line_no) + ": sequence numbers must increase");
    out.records.push_back(std::move(*r));
  }
  if (line_no == 0)
    return fail("the trace is empty");
  // Only empty lines before the end: no header was read.
  if (!out.header.IsObject())
    return fail("line 1 is not a waggle trace header");
  return out;
}

}  // namespace waggle
