// libFuzzer target: the filter parser (proto::parse_filter), which every REQ
// and COUNT filter and every listener or push registration goes through.
// Properties: a parsed filter renders to JSON that parses back to the same
// filter; a filter that "matches nothing" matches no event; a search filter
// never matches live.

#include <string_view>

#include "messages/proto/event.hpp"
#include "messages/proto/filter.hpp"
#include "tests/fuzz/fuzz_check.hpp"

using namespace waggle::proto;

namespace {

// Two events unlike each other, to run the matcher against.
const std::vector<event>& samples() {
  static const std::vector<event> evs = [] {
    event a;
    a.id = std::string(64, 'a');
    a.pubkey = std::string(64, 'b');
    a.created_at = 1700000000;
    a.kind = 1;
    a.tags = {{"h", "general"}, {"p", std::string(64, 'c')}, {"t", "x"}};
    a.content = "hello world";
    event b = a;
    b.id = std::string(64, '1');
    b.kind = 9;
    b.created_at = 0;
    b.tags = {{"e", std::string(64, 'd'), "wss://x", "root"}, {"A"}};
    return std::vector<event>{a, b};
  }();
  return evs;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  filter_limits lim;
  auto f = parse_filter({reinterpret_cast<const char*>(data), size}, lim);
  if (!f)
    return 0;
  auto back = parse_filter(to_json(*f), lim);
  FUZZ_REQUIRE(back.has_value());
  FUZZ_REQUIRE(*back == *f);
  for (const auto& ev : samples()) {
    bool hit = matches(*f, ev);
    if (f->matches_nothing() || f->search)
      FUZZ_REQUIRE(!hit);
  }
  if (f->search)
    (void)search_terms(*f->search);
  FUZZ_REQUIRE(f->effective_limit(lim) <= lim.max_limit);
  return 0;
}
