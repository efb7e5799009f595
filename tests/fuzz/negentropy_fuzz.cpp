// libFuzzer target: the NIP-77 responder (proto::negentropy::reconciler::respond),
// which answers every NEG-OPEN and NEG-MSG a client sends. Properties: any
// input is answered or refused, never a crash or a read out of bounds; an
// answer fits the frame limit; an answer is itself a message the initiator
// reads without error.

#include <string>
#include <string_view>

#include "messages/proto/negentropy.hpp"
#include "tests/fuzz/fuzz_check.hpp"

namespace neg = waggle::proto::negentropy;

namespace {

const neg::storage& relay_set() {
  static const neg::storage s = [] {
    neg::storage out;
    for (uint64_t i = 0; i < 2000; ++i) {
      std::string id(32, '\0');
      for (size_t b = 0; b < 32; ++b)
        id[b] = static_cast<char>((i * 2654435761u >> (b % 4 * 8)) ^ (b * 31));
      out.insert(1700000000 + i / 3, id);
    }
    out.seal();
    return out;
  }();
  return s;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  constexpr size_t limit = neg::min_frame_size_limit;
  std::string_view in(reinterpret_cast<const char*>(data), size);
  neg::reconciler server(relay_set(), limit);
  auto r = server.respond(in);
  if (!r.error.empty())
    return 0;
  FUZZ_REQUIRE(r.message.size() <= limit);
  FUZZ_REQUIRE(!r.message.empty());
  neg::storage empty;
  empty.seal();
  neg::reconciler client(empty, limit);
  auto back = client.reconcile(r.message);
  FUZZ_REQUIRE(back.error.empty() || r.message.size() == 1);
  return 0;
}
