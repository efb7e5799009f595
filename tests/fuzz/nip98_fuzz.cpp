// libFuzzer target: NIP-98 header parsing (proto::verify_nip98), which runs
// on every POST /events and NIP-86 call before anything else. The input is
// "<Authorization value>\n<body>". Properties: an accepted token names a
// 64-hex key; a token is never accepted for another host, path or method;
// base64 decoding of the same bytes never crashes and round-trips.

#include <string_view>

#include "messages/proto/event.hpp"
#include "messages/proto/nip98.hpp"
#include "tests/fuzz/fuzz_check.hpp"

using namespace waggle::proto;

namespace {

// The seeds (tests/fuzz/corpus/nip98) are signed for this moment and request.
constexpr int64_t seed_now = 1700000000;
constexpr std::string_view host = "team.example";
constexpr std::string_view target = "/events";

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view in{reinterpret_cast<const char*>(data), size};
  auto nl = in.find('\n');
  auto header = in.substr(0, nl);
  auto body = nl == std::string_view::npos ? std::string_view{} : in.substr(nl + 1);
  auto r = verify_nip98(header, "POST", host, target, body, seed_now);
  if (r.ok) {
    FUZZ_REQUIRE(is_lower_hex(r.pubkey, 64));
    FUZZ_REQUIRE(!verify_nip98(header, "POST", "other.example", target, body, seed_now).ok);
    FUZZ_REQUIRE(!verify_nip98(header, "POST", host, "/other", body, seed_now).ok);
    FUZZ_REQUIRE(!verify_nip98(header, "GET", host, target, body, seed_now).ok);
    FUZZ_REQUIRE(!verify_nip98(header, "POST", host, target, body, seed_now + 3600).ok);
  }
  if (auto decoded = base64_decode(in))
    FUZZ_REQUIRE(base64_decode(base64_encode(*decoded)) == decoded);
  return 0;
}
