#include "messages/proto/bus_payloads.hpp"

#include <charconv>

#include <rapidjson/document.h>

#include "messages/proto/event.hpp"

namespace waggle::proto {

namespace {

// A positive community id that fills the whole of [b, e).
std::optional<int64_t> community_in(const char* b, const char* e) {
  int64_t id = 0;
  auto [end, ec] = std::from_chars(b, e, id);
  if (ec != std::errc{} || end != e || id <= 0)
    return std::nullopt;
  return id;
}

}  // namespace

std::string roster_payload(int64_t community_id, std::string_view channel) {
  return std::to_string(community_id) + "\n" + std::string{channel};
}

std::optional<roster_key> parse_roster_payload(std::string_view payload) {
  auto nl = payload.find('\n');
  if (nl == std::string_view::npos || nl + 1 >= payload.size() || payload.size() > 200)
    return std::nullopt;
  auto id = community_in(payload.data(), payload.data() + nl);
  if (!id)
    return std::nullopt;
  return roster_key{*id, std::string{payload.substr(nl + 1)}};
}

std::string ephemeral_payload(std::string_view origin, int64_t community_id, std::string_view raw) {
  std::string out{origin};
  out += '\n';
  out += std::to_string(community_id);
  out += '\n';
  out += raw;
  return out;
}

std::optional<ephemeral_parts> parse_ephemeral_payload(std::string_view payload) {
  auto first = payload.find('\n');
  if (first == std::string_view::npos)
    return std::nullopt;
  auto second = payload.find('\n', first + 1);
  if (second == std::string_view::npos)
    return std::nullopt;
  auto id = community_in(payload.data() + first + 1, payload.data() + second);
  if (!id)
    return std::nullopt;
  return ephemeral_parts{std::string{payload.substr(0, first)}, *id,
                         std::string{payload.substr(second + 1)}};
}

std::string gate_request_payload(int64_t community_id) { return std::to_string(community_id); }

std::optional<int64_t> parse_gate_request(std::string_view payload) {
  return community_in(payload.data(), payload.data() + payload.size());
}

std::string gate_answer_payload(const std::vector<std::string>& event_ids) {
  std::string out;
  for (const auto& id : event_ids) {
    if (!out.empty())
      out += '\n';
    out += id;
  }
  return out;
}

void append_gate_answer_ids(std::string_view payload, std::vector<std::string>& out) {
  size_t at = 0;
  while (at < payload.size()) {
    auto end = payload.find('\n', at);
    if (end == std::string_view::npos)
      end = payload.size();
    auto id = payload.substr(at, end - at);
    if (is_lower_hex(id, 64))
      out.emplace_back(id);
    at = end + 1;
  }
}

std::string ping_answer_payload(std::string_view node_id, std::string_view version) {
  // Node ids are [A-Za-z0-9_-] (bus_valid_node_id) and the version is ours:
  // nothing to escape.
  return "{\"node\":\"" + std::string{node_id} + "\",\"version\":\"" + std::string{version} + "\"}";
}

std::string probe_payload(std::string_view node_id, uint64_t n) {
  return "{\"node\":\"" + std::string{node_id} + "\",\"probe\":" + std::to_string(n) + "}";
}

std::optional<uint64_t> parse_probe_number(std::string_view payload) {
  rapidjson::Document doc;
  doc.Parse<rapidjson::kParseIterativeFlag>(payload.data(), payload.size());
  if (doc.HasParseError() || !doc.IsObject())
    return std::nullopt;
  auto i = doc.FindMember("probe");
  if (i == doc.MemberEnd() || !i->value.IsUint64())
    return std::nullopt;
  return i->value.GetUint64();
}

}  // namespace waggle::proto
