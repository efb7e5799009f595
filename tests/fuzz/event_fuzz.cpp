// libFuzzer target: the event validator (proto::parse_event and the checks
// every stored event passes: id, signature, kind classes, NIP-40 expiry,
// NIP-29 group tags). Properties: a parsed event's id is the hash of its
// canonical serialisation, its `raw` parses back to the same event, and a
// signature that verifies still verifies after that round trip.

#include <string_view>

#include "messages/proto/event.hpp"
#include "messages/proto/nip29.hpp"
#include "messages/proto/nip40.hpp"
#include "tests/fuzz/fuzz_check.hpp"

using namespace waggle::proto;
using namespace waggle::proto::nip29;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto ev = parse_event({reinterpret_cast<const char*>(data), size});
  if (!ev)
    return 0;
  FUZZ_REQUIRE(compute_id(*ev) == ev->id);
  FUZZ_REQUIRE(ev->raw == to_json(*ev));
  auto back = parse_event(ev->raw);
  FUZZ_REQUIRE(back.has_value());
  FUZZ_REQUIRE(*back == *ev);
  bool verified = verify_signature(*ev);
  FUZZ_REQUIRE(verify_signature(*back) == verified);
  (void)d_tag(*ev);
  (void)first_tag_value(*ev, "h");
  (void)expiration_of(*ev);
  (void)has_expiration_tag(*ev);
  (void)channel_of(*ev);
  if (is_group_command(ev->kind))
    (void)parse_group_command(*ev);
  return 0;
}
