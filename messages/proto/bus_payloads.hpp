#pragma once

// The payloads nodes put on the bus (docs/bus.md, docs/scaling.md), and
// their parsers. A payload comes from the network: every parser takes any
// bytes and answers nullopt (or skips what it cannot read) rather than
// trusting another node. Pure functions, so the fuzz target of the bus
// decoder (tests/fuzz/bus_fuzz.cpp) reaches all of them.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace waggle::proto {

// A roster request (waggle.node.<id>.roster): "community\nchannel".
struct roster_key {
  int64_t community_id = 0;
  std::string channel;
};
std::string roster_payload(int64_t community_id, std::string_view channel);
std::optional<roster_key> parse_roster_payload(std::string_view payload);

// An ephemeral event for the other nodes' hubs: origin node, community, the
// event's JSON, one per line.
struct ephemeral_parts {
  std::string origin;
  int64_t community_id = 0;
  std::string raw;
};
std::string ephemeral_payload(std::string_view origin, int64_t community_id, std::string_view raw);
std::optional<ephemeral_parts> parse_ephemeral_payload(std::string_view payload);

// The push gate (waggle.node.<id>.gate): the request names a community; the
// answer lists event ids, one per line. An answer's line that is not an
// event id is dropped (the ids reach a statement).
std::string gate_request_payload(int64_t community_id);
std::optional<int64_t> parse_gate_request(std::string_view payload);
std::string gate_answer_payload(const std::vector<std::string>& event_ids);
void append_gate_answer_ids(std::string_view payload, std::vector<std::string>& out);

// The bus probe: a node's answer to a ping, and a numbered probe; and the
// number back out of a probe (nullopt: someone else's message).
std::string ping_answer_payload(std::string_view node_id, std::string_view version);
std::string probe_payload(std::string_view node_id, uint64_t n);
std::optional<uint64_t> parse_probe_number(std::string_view payload);

}  // namespace waggle::proto
