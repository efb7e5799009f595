#include "messages/proto/client_message.hpp"
#include "messages/proto/json_detail.hpp"
#include "messages/proto/negentropy.hpp"

#include <rapidjson/document.h>
#include <rapidjson/error/en.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <charconv>
#include <cstring>

namespace waggle::proto {


namespace {

using reply = parse_error::reply_kind;

parse_error notice(std::string reason) {
  return parse_error{status{ec::invalid, std::move(reason)}, reply::notice, {}};
}

std::string_view str_of(const rapidjson::Value& v) {
  return std::string_view(v.GetString(), v.GetStringLength());
}

// The event id a reply can refer to, or "" when the object has no usable id.
std::string readable_event_id(const rapidjson::Value& v) {
  if (!v.IsObject())
    return {};
  auto it = v.FindMember("id");
  if (it == v.MemberEnd() || !it->value.IsString())
    return {};
  std::string_view id = str_of(it->value);
  return is_lower_hex(id, 64) ? std::string(id) : std::string();
}

// EVENT and AUTH: ["VERB", {event}]. Errors become OK false when the id is readable.
template <class Msg>
std::variant<client_message, parse_error> parse_event_frame(const rapidjson::Value& arr,
                                                            const char* verb) {
  std::string id = arr.Size() >= 2 ? readable_event_id(arr[1]) : std::string();
  auto fail = [&](status st) -> parse_error {
    if (id.empty())
      return parse_error{std::move(st), reply::notice, {}};
    return parse_error{std::move(st), reply::ok, std::move(id)};
  };
  if (arr.Size() != 2)
    return fail(status{ec::invalid, std::string(verb) + " message must have exactly 2 elements"});
  if (!arr[1].IsObject())
    return fail(status{ec::invalid, std::string(verb) + " payload must be an event object"});
  auto ev = detail::parse_event_value(arr[1]);
  if (!ev)
    return fail(ev.error());
  return client_message{Msg{std::move(*ev)}};
}

// Checks a subscription id; returns an empty reason when it is usable.
std::string check_sub_id(const rapidjson::Value& v) {
  if (!v.IsString())
    return "subscription id must be a string";
  std::string_view s = str_of(v);
  if (s.empty())
    return "subscription id must not be empty";
  if (s.size() > max_subscription_id_len)
    return "subscription id too long (max " + std::to_string(max_subscription_id_len) + " bytes)";
  if (!detail::valid_utf8(s))
    return "subscription id must be valid UTF-8";
  return {};
}

// REQ and COUNT: ["VERB", sub, filter...]. Errors become CLOSED when the
// subscription id is readable.
template <class Msg>
std::variant<client_message, parse_error> parse_sub_frame(const rapidjson::Value& arr,
                                                          const char* verb,
                                                          const filter_limits& lim) {
  if (arr.Size() < 2)
    return notice(std::string(verb) + " message needs a subscription id");
  // An id that is a valid string, only too long, is still one the client can
  // recognise: it gets the CLOSED docs/protocol.md promises, naming the id as
  // sent (the frame cap bounds its size). An unreadable id has nothing a
  // CLOSED could name, so it stays a NOTICE.
  if (arr[1].IsString() && arr[1].GetStringLength() > max_subscription_id_len
      && detail::valid_utf8(str_of(arr[1])))
    return parse_error{status{ec::invalid, "subscription id too long (max "
                                             + std::to_string(max_subscription_id_len)
                                             + " bytes)"},
                       reply::closed, std::string(str_of(arr[1]))};
  if (std::string why = check_sub_id(arr[1]); !why.empty())
    return notice(std::move(why));
  std::string sub(str_of(arr[1]));
  auto closed = [&](std::string reason) {
    return parse_error{status{ec::invalid, std::move(reason)}, reply::closed, sub};
  };
  const size_t n = arr.Size() - 2;
  if (n == 0)
    return closed(std::string(verb) + " needs at least one filter");
  if (n > lim.max_filters)
    return closed("too many filters (max " + std::to_string(lim.max_filters) + ")");
  Msg msg;
  msg.filters.reserve(n);
  for (size_t i = 2; i < arr.Size(); ++i) {
    auto f = detail::parse_filter_value(arr[static_cast<rapidjson::SizeType>(i)], lim);
    if (!f)
      return parse_error{f.error(), reply::closed, sub};
    msg.filters.push_back(std::move(*f));
  }
  msg.sub_id = std::move(sub);
  return client_message{std::move(msg)};
}

// NIP-77 frames: ["NEG-OPEN", sub, filter, hex], ["NEG-MSG", sub, hex],
// ["NEG-CLOSE", sub]. Errors become NEG-ERR when the id is readable.
std::variant<client_message, parse_error> parse_neg_frame(const rapidjson::Value& arr,
                                                          std::string_view verb,
                                                          const filter_limits& lim) {
  const size_t want = verb == "NEG-OPEN" ? 4 : verb == "NEG-MSG" ? 3 : 2;
  if (arr.Size() < 2)
    return notice(std::string(verb) + " message needs a subscription id");
  if (std::string why = check_sub_id(arr[1]); !why.empty())
    return notice(std::move(why));
  std::string sub(str_of(arr[1]));
  auto neg_err = [&](std::string reason) {
    return parse_error{status{ec::invalid, std::move(reason)}, reply::neg_err, sub};
  };
  if (arr.Size() != want)
    return neg_err(std::string(verb) + " message must have " + std::to_string(want) +
                   " elements");
  if (verb == "NEG-CLOSE")
    return client_message{neg_close_msg{std::move(sub)}};
  const auto& hex = arr[want - 1];
  std::string message;
  if (!hex.IsString() || !negentropy::from_hex(str_of(hex), message) || message.empty())
    return neg_err("negentropy message must be a non-empty hex string");
  if (verb == "NEG-MSG")
    return client_message{neg_msg{std::move(sub), std::move(message)}};
  auto f = detail::parse_filter_value(arr[2], lim);
  if (!f)
    return parse_error{f.error(), reply::neg_err, sub};
  return client_message{neg_open_msg{std::move(sub), std::move(*f), std::move(message)}};
}

// The DOM lives in stack buffers first (most frames are small), spilling to the
// heap only for big frames. The iterative parser keeps deeply nested input from
// exhausting the thread's stack.
using pool_allocator = rapidjson::MemoryPoolAllocator<rapidjson::CrtAllocator>;
using frame_document = rapidjson::GenericDocument<rapidjson::UTF8<>, pool_allocator, pool_allocator>;
constexpr unsigned frame_parse_flags =
    rapidjson::kParseValidateEncodingFlag | rapidjson::kParseIterativeFlag;

void append_frame_start(std::string& out, std::string_view verb, std::string_view first) {
  out.append("[\"", 2);
  out.append(verb);
  out.append("\",", 2);
  detail::append_json_string(out, first);
}

}  // namespace

std::variant<client_message, parse_error> parse_client_message(std::string_view frame,
                                                               const filter_limits& lim) {
  // A raw NUL byte is never valid JSON (control characters must be escaped),
  // and the in-situ parser below would take it for the end of the input.
  if (std::memchr(frame.data(), '\0', frame.size()) != nullptr)
    return notice("message is not valid JSON (raw NUL byte)");
  // Parse in situ on a private copy: strings are decoded in place instead of
  // being copied again into the DOM, which is measurably faster.
  // Four NULs after the frame, not one: validating UTF-8, rapidjson reads all
  // the continuation bytes a lead byte announces before it checks them, so a
  // frame ending in a truncated sequence (0xF4 last) made it read up to
  // three bytes past the copy (found by tests/fuzz/client_message_fuzz.cpp).
  std::string text;
  text.reserve(frame.size() + 4);
  text.append(frame);
  text.append(3, '\0');
  alignas(16) char value_buf[16384];
  alignas(16) char stack_buf[4096];
  pool_allocator value_alloc(value_buf, sizeof value_buf);
  pool_allocator stack_alloc(stack_buf, sizeof stack_buf);
  frame_document doc(&value_alloc, 1024, &stack_alloc);
  doc.ParseInsitu<frame_parse_flags>(text.data());
  if (doc.HasParseError())
    return notice(std::string("message is not valid JSON (") +
                  rapidjson::GetParseError_En(doc.GetParseError()) + " at offset " +
                  std::to_string(doc.GetErrorOffset()) + ")");
  if (!doc.IsArray())
    return notice("message must be a JSON array");
  if (doc.Empty())
    return notice("message must not be an empty array");
  if (!doc[0].IsString())
    return notice("message type must be a string");
  const std::string_view verb = str_of(doc[0]);
  const rapidjson::Value& arr = doc;

  if (verb == "EVENT")
    return parse_event_frame<event_msg>(arr, "EVENT");
  if (verb == "REQ")
    return parse_sub_frame<req_msg>(arr, "REQ", lim);
  if (verb == "COUNT")
    return parse_sub_frame<count_msg>(arr, "COUNT", lim);
  if (verb == "CLOSE") {
    if (arr.Size() != 2)
      return notice("CLOSE message must be [\"CLOSE\", <subscription id>]");
    if (std::string why = check_sub_id(arr[1]); !why.empty())
      return notice(std::move(why));
    return client_message{close_msg{std::string(str_of(arr[1]))}};
  }
  if (verb == "AUTH")
    return parse_event_frame<auth_msg>(arr, "AUTH");
  if (verb == "NEG-OPEN" || verb == "NEG-MSG" || verb == "NEG-CLOSE")
    return parse_neg_frame(arr, verb, lim);
  return notice("unknown message type");
}

std::string render_ok(std::string_view event_id, bool accepted, std::string_view message) {
  std::string out;
  out.reserve(20 + event_id.size() + message.size() + 8);
  append_frame_start(out, "OK", event_id);
  out.append(accepted ? ",true," : ",false,");
  detail::append_json_string(out, message);
  out.push_back(']');
  return out;
}

std::string render_event(std::string_view sub_id, std::string_view raw_event_json) {
  std::string out;
  out.reserve(16 + sub_id.size() + raw_event_json.size());
  append_frame_start(out, "EVENT", sub_id);
  out.push_back(',');
  out.append(raw_event_json);
  out.append(event_tail);
  return out;
}

std::string render_event_head(std::string_view sub_id) {
  std::string out;
  out.reserve(12 + sub_id.size());
  append_frame_start(out, "EVENT", sub_id);
  out.push_back(',');
  return out;
}

std::string render_eose(std::string_view sub_id) {
  std::string out;
  out.reserve(12 + sub_id.size());
  append_frame_start(out, "EOSE", sub_id);
  out.push_back(']');
  return out;
}

std::string render_closed(std::string_view sub_id, std::string_view message) {
  std::string out;
  out.reserve(16 + sub_id.size() + message.size());
  append_frame_start(out, "CLOSED", sub_id);
  out.push_back(',');
  detail::append_json_string(out, message);
  out.push_back(']');
  return out;
}

std::string render_notice(std::string_view message) {
  std::string out;
  out.reserve(16 + message.size());
  append_frame_start(out, "NOTICE", message);
  out.push_back(']');
  return out;
}

std::string render_auth(std::string_view challenge) {
  std::string out;
  out.reserve(12 + challenge.size());
  append_frame_start(out, "AUTH", challenge);
  out.push_back(']');
  return out;
}

std::string render_count(std::string_view sub_id, uint64_t count) {
  std::string out;
  out.reserve(32 + sub_id.size());
  append_frame_start(out, "COUNT", sub_id);
  out.append(",{\"count\":", 10);
  char buf[24];
  auto r = std::to_chars(buf, buf + sizeof buf, count);
  out.append(buf, static_cast<size_t>(r.ptr - buf));
  out.append("}]", 2);
  return out;
}

std::string render_neg_msg(std::string_view sub_id, std::string_view message) {
  std::string out;
  out.reserve(20 + sub_id.size() + message.size() * 2);
  append_frame_start(out, "NEG-MSG", sub_id);
  out.append(",\"", 2);
  out += negentropy::to_hex(message);
  out.append("\"]", 2);
  return out;
}

std::string render_neg_err(std::string_view sub_id, std::string_view reason) {
  std::string out;
  out.reserve(20 + sub_id.size() + reason.size());
  append_frame_start(out, "NEG-ERR", sub_id);
  out.push_back(',');
  detail::append_json_string(out, reason);
  out.push_back(']');
  return out;
}

std::string render_submit_reply(std::string_view event_id, bool accepted,
                                std::string_view message) {
  rapidjson::StringBuffer buf;
  rapidjson::Writer<rapidjson::StringBuffer> w{buf};
  w.StartObject();
  if (!event_id.empty()) {
    w.Key("id");
    w.String(event_id.data(), static_cast<rapidjson::SizeType>(event_id.size()));
  }
  w.Key("accepted");
  w.Bool(accepted);
  w.Key("message");
  w.String(message.data(), static_cast<rapidjson::SizeType>(message.size()));
  w.EndObject();
  return std::string(buf.GetString(), buf.GetSize());
}

}  // namespace waggle::proto
