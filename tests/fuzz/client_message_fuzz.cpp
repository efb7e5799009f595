// libFuzzer target: the client-message codec (proto::parse_client_message),
// the first thing every WebSocket frame meets. Properties beyond "no crash":
// a filter of a parsed REQ or COUNT renders to JSON that parses back to the
// same filter (the cluster and the traces carry filters as that JSON), and a
// parsed event renders to JSON that parses back to the same event.

#include <string_view>
#include <variant>

#include "messages/proto/client_message.hpp"
#include "tests/fuzz/fuzz_check.hpp"

using namespace waggle::proto;

namespace {

void check_filters(const std::vector<filter>& filters, const filter_limits& lim) {
  for (const auto& f : filters) {
    auto back = parse_filter(to_json(f), lim);
    FUZZ_REQUIRE(back.has_value());
    FUZZ_REQUIRE(*back == f);
  }
}

void check_event(const event& ev) {
  auto back = parse_event(to_json(ev));
  FUZZ_REQUIRE(back.has_value());
  FUZZ_REQUIRE(*back == ev);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  filter_limits lim;
  auto parsed = parse_client_message({reinterpret_cast<const char*>(data), size}, lim);
  if (auto* msg = std::get_if<client_message>(&parsed)) {
    if (auto* req = std::get_if<req_msg>(msg))
      check_filters(req->filters, lim);
    else if (auto* count = std::get_if<count_msg>(msg))
      check_filters(count->filters, lim);
    else if (auto* ev = std::get_if<event_msg>(msg))
      check_event(ev->ev);
    else if (auto* auth = std::get_if<auth_msg>(msg))
      check_event(auth->ev);
  }
  return 0;
}
