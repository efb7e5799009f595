#pragma once

// Text helpers shared by the protocol parsers, the gateway and the config: one
// definition, so a header, a token and a list item are trimmed alike.

#include <string_view>

namespace waggle::proto {

// Without the spaces and tabs around it: HTTP's optional whitespace (RFC 9110,
// 5.6.3), and what a comma-separated setting allows around its items.
inline std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t'))
    s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t'))
    s.remove_suffix(1);
  return s;
}

}  // namespace waggle::proto
