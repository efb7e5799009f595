#pragma once

// strfry's write-policy plugin protocol (its docs/plugins.md), as pure
// functions: one JSON request line per event on the plugin's stdin, one
// JSON answer line per event on its stdout. The plugin actor
// (actors/policy/write_policy_plugin) owns the process; docs/write-policy.md
// describes the whole feature.

#include <cstdint>
#include <string>
#include <string_view>

#include "messages/proto/event.hpp"
#include "messages/proto/status.hpp"

namespace waggle {

// What a plugin decided about one event.
enum class policy_action : uint8_t {
  accept,
  reject,         // OK false with the plugin's message
  shadow_reject,  // OK true, but nothing stored or delivered
};

}  // namespace waggle

namespace waggle::proto {

// "IP4" or "IP6" for a client address as the gateway gives it (an IPv4-mapped
// IPv6 address already unmapped). An unknown (empty) address is "IP4".
std::string_view source_type_of(std::string_view ip);

// {"type":"new","event":{...},"receivedAt":N,"sourceType":"IP4","sourceInfo":"1.2.3.4"}
// followed by "\n". The event is embedded as its raw (verified) JSON.
std::string render_policy_request(const event& ev, int64_t received_at, std::string_view ip);

struct policy_answer {
  std::string id;
  policy_action action = policy_action::reject;
  std::string msg;
};

// One line of the plugin's stdout. Anything that is not an object with a
// 64-hex `id` and a known `action` is an error (logged and ignored by the
// actor: the event then times out).
result<policy_answer> parse_policy_answer(std::string_view line);

}  // namespace waggle::proto
