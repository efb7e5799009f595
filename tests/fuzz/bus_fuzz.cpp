// libFuzzer target: the bus message decoders. What another node (or anyone
// who reaches the bus) puts on it: the payloads of roster requests,
// ephemeral events, the push gate and the bus probe
// (messages/proto/bus_payloads.hpp), and the CAF driver's peer frames,
// decoded with CAF's binary deserialiser (actors/bus/caf_bus.cpp). The
// first byte picks the decoder. Properties: whatever parses renders to a
// payload that parses back to the same value.

#include <string>
#include <string_view>
#include <vector>

#include <caf/binary_deserializer.hpp>
#include <caf/binary_serializer.hpp>

#include "messages/bus.hpp"
#include "messages/proto/bus_payloads.hpp"
#include "messages/proto/event.hpp"
#include "tests/fuzz/fuzz_check.hpp"

using namespace waggle;
using namespace waggle::proto;

namespace {

template <class T>
bool decode(std::string_view body, T& value) {
  caf::binary_deserializer source{static_cast<caf::execution_unit*>(nullptr), body.data(),
                                  body.size()};
  return !source(value) && source.remaining() == 0;
}

template <class T>
std::string encode(T& value) {
  std::vector<char> buf;
  caf::binary_serializer sink{static_cast<caf::execution_unit*>(nullptr), buf};
  FUZZ_REQUIRE(!sink(value));
  return {buf.begin(), buf.end()};
}

// Decodes, and if that works encodes and decodes again: the same bytes.
template <class T>
void binary_round_trip(std::string_view body) {
  T value;
  if (!decode(body, value))
    return;
  auto once = encode(value);
  T back;
  FUZZ_REQUIRE(decode(once, back));
  FUZZ_REQUIRE(encode(back) == once);
}

void roster(std::string_view in) {
  auto key = parse_roster_payload(in);
  if (!key)
    return;
  FUZZ_REQUIRE(key->community_id > 0 && !key->channel.empty());
  auto back = parse_roster_payload(roster_payload(key->community_id, key->channel));
  FUZZ_REQUIRE(back && back->community_id == key->community_id && back->channel == key->channel);
}

void ephemeral(std::string_view in) {
  auto parts = parse_ephemeral_payload(in);
  if (!parts)
    return;
  auto back = parse_ephemeral_payload(ephemeral_payload(parts->origin, parts->community_id, parts->raw));
  FUZZ_REQUIRE(back && back->origin == parts->origin && back->community_id == parts->community_id
               && back->raw == parts->raw);
  // What the receiving node does next (actors/fanout/cluster_relay.cpp).
  if (auto ev = parse_event(parts->raw))
    (void)verify_signature(*ev);
}

void gate(std::string_view in) {
  if (auto community = parse_gate_request(in))
    FUZZ_REQUIRE(parse_gate_request(gate_request_payload(*community)) == community);
  std::vector<std::string> ids;
  append_gate_answer_ids(in, ids);
  for (const auto& id : ids)
    FUZZ_REQUIRE(is_lower_hex(id, 64));
  std::vector<std::string> back;
  append_gate_answer_ids(gate_answer_payload(ids), back);
  FUZZ_REQUIRE(back == ids);
}

void probe(std::string_view in) {
  if (auto n = parse_probe_number(in))
    FUZZ_REQUIRE(parse_probe_number(probe_payload("node-a", *n)) == n);
}

void peer_frame(std::string_view in) {
  bus_peer_frame frame;
  if (!decode(in, frame))
    return;
  binary_round_trip<bus_interest>(frame.body);
  binary_round_trip<bus_forward>(frame.body);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0)
    return 0;
  std::string_view in{reinterpret_cast<const char*>(data) + 1, size - 1};
  switch (data[0] % 8) {
    case 0: roster(in); break;
    case 1: ephemeral(in); break;
    case 2: gate(in); break;
    case 3: probe(in); break;
    case 4: binary_round_trip<bus_interest>(in); break;
    case 5: binary_round_trip<bus_forward>(in); break;
    case 6: binary_round_trip<bus_peer_frame>(in); break;
    default: peer_frame(in); break;
  }
  return 0;
}
