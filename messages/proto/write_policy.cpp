#include "messages/proto/write_policy.hpp"

#include <rapidjson/document.h>

#include "messages/proto/json_detail.hpp"

namespace waggle::proto {

std::string_view source_type_of(std::string_view ip) {
  return ip.find(':') == std::string_view::npos ? "IP4" : "IP6";
}

std::string render_policy_request(const event& ev, int64_t received_at, std::string_view ip) {
  std::string out;
  out.reserve(ev.raw.size() + 96 + ip.size());
  out += R"({"type":"new","event":)";
  out += ev.raw;
  out += R"(,"receivedAt":)";
  detail::append_int(out, received_at);
  out += R"(,"sourceType":)";
  detail::append_json_string(out, source_type_of(ip));
  out += R"(,"sourceInfo":)";
  detail::append_json_string(out, ip);
  out += "}\n";
  return out;
}

result<policy_answer> parse_policy_answer(std::string_view line) {
  auto bad = [](std::string reason) { return status{ec::invalid, std::move(reason)}; };
  rapidjson::Document d;
  d.Parse<rapidjson::kParseIterativeFlag>(line.data(), line.size());
  if (d.HasParseError() || !d.IsObject())
    return bad("not a JSON object");
  auto id = d.FindMember("id");
  if (id == d.MemberEnd() || !id->value.IsString()
      || !is_lower_hex({id->value.GetString(), id->value.GetStringLength()}, 64))
    return bad("no event id");
  auto action = d.FindMember("action");
  if (action == d.MemberEnd() || !action->value.IsString())
    return bad("no action");
  policy_answer out;
  out.id.assign(id->value.GetString(), id->value.GetStringLength());
  std::string_view a{action->value.GetString(), action->value.GetStringLength()};
  if (a == "accept")
    out.action = policy_action::accept;
  else if (a == "reject")
    out.action = policy_action::reject;
  else if (a == "shadowReject")
    out.action = policy_action::shadow_reject;
  else
    return bad("unknown action");
  if (auto msg = d.FindMember("msg"); msg != d.MemberEnd()) {
    if (!msg->value.IsString())
      return bad("msg is not a string");
    out.msg.assign(msg->value.GetString(), msg->value.GetStringLength());
  }
  return out;
}

}  // namespace waggle::proto
