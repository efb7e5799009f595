#pragma once

// Parsing of client frames: ["EVENT", ev], ["REQ", sub, f...], ["CLOSE", sub],
// ["AUTH", ev], ["COUNT", sub, f...], and NIP-77's ["NEG-OPEN", sub, f, hex],
// ["NEG-MSG", sub, hex], ["NEG-CLOSE", sub]. And rendering of relay frames.

#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "messages/proto/event.hpp"
#include "messages/proto/filter.hpp"

namespace waggle::proto {

constexpr size_t max_subscription_id_len = 64;

struct event_msg { event ev; };
struct req_msg { std::string sub_id; std::vector<filter> filters; };
struct count_msg { std::string sub_id; std::vector<filter> filters; };
struct close_msg { std::string sub_id; };
struct auth_msg { event ev; };
// NIP-77; `message` is the negentropy message decoded from its hex.
struct neg_open_msg { std::string sub_id; filter f; std::string message; };
struct neg_msg { std::string sub_id; std::string message; };
struct neg_close_msg { std::string sub_id; };

using client_message = std::variant<event_msg, req_msg, count_msg, close_msg, auth_msg,
                                    neg_open_msg, neg_msg, neg_close_msg>;

// A parse failure tells the caller what to answer: for an EVENT with a
// readable id an OK false; for a REQ/COUNT with a readable sub id a CLOSED;
// for a NEG-* with a readable sub id a NEG-ERR; otherwise a NOTICE.
struct parse_error {
  status err;
  enum class reply_kind { notice, ok, closed, neg_err } reply = reply_kind::notice;
  std::string ref;  // event id or subscription id for the reply
};

std::variant<client_message, parse_error> parse_client_message(std::string_view frame,
                                                               const filter_limits& lim);

// Relay -> client frames, compact JSON.
std::string render_ok(std::string_view event_id, bool accepted, std::string_view message);
std::string render_event(std::string_view sub_id, std::string_view raw_event_json);
// render_event in parts, for a frame whose event JSON is shared with other
// frames (socket_sink.hpp, out_frame): head + raw_event_json + event_tail is
// byte for byte render_event(sub_id, raw_event_json).
std::string render_event_head(std::string_view sub_id);
inline constexpr std::string_view event_tail = "]";
std::string render_eose(std::string_view sub_id);
std::string render_closed(std::string_view sub_id, std::string_view message);
std::string render_notice(std::string_view message);
std::string render_auth(std::string_view challenge);
std::string render_count(std::string_view sub_id, uint64_t count);
// NIP-77: `message` is binary, sent as lowercase hex.
std::string render_neg_msg(std::string_view sub_id, std::string_view message);
std::string render_neg_err(std::string_view sub_id, std::string_view reason);

// POST /events's answer body: what OK says, as a JSON object
// ({"id", "accepted", "message"}; no "id" when none was read).
std::string render_submit_reply(std::string_view event_id, bool accepted, std::string_view message);

}  // namespace waggle::proto
