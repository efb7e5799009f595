#include "messages/proto/nip40.hpp"

#include <charconv>

namespace waggle::proto {

namespace {
constexpr std::string_view expiration_tag = "expiration";
}  // namespace

result<std::optional<int64_t>> expiration_of(const event& ev) {
  for (const auto& t : ev.tags) {
    if (t.empty() || t[0] != expiration_tag)
      continue;
    // Only the first expiration tag counts, whatever the later ones say.
    if (t.size() < 2)
      return status{ec::invalid, "expiration tag has no value"};
    const auto& v = t[1];
    // from_chars alone would accept a leading '-'; NIP-40 values are plain
    // decimal unix seconds.
    if (v.empty() || v.find_first_not_of("0123456789") != std::string::npos)
      return status{ec::invalid, "expiration tag is not a non-negative decimal integer"};
    int64_t at = 0;
    auto [end, err] = std::from_chars(v.data(), v.data() + v.size(), at);
    if (err != std::errc{} || end != v.data() + v.size())
      return status{ec::invalid, "expiration tag is out of range"};
    return std::optional<int64_t>{at};
  }
  return std::optional<int64_t>{};
}

bool has_expiration_tag(const event& ev) {
  for (const auto& t : ev.tags)
    if (!t.empty() && t[0] == expiration_tag)
      return true;
  return false;
}

}  // namespace waggle::proto
