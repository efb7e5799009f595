#include "messages/values.hpp"

#include <cctype>

namespace waggle {

std::string normalize_host(std::string_view host) {
  // Surrounding whitespace is never part of a Host header value.
  while (!host.empty() && std::isspace(static_cast<unsigned char>(host.front())))
    host.remove_prefix(1);
  while (!host.empty() && std::isspace(static_cast<unsigned char>(host.back())))
    host.remove_suffix(1);

  std::string_view name = host;
  if (!host.empty() && host.front() == '[') {
    // "[::1]:7777" -> "[::1]"; the brackets stay.
    auto close = host.find(']');
    if (close != std::string_view::npos)
      name = host.substr(0, close + 1);
  } else {
    auto colon = host.find(':');
    // Exactly one colon: host:port. More than one: an unbracketed IPv6
    // address, which has no port to strip.
    if (colon != std::string_view::npos && host.find(':', colon + 1) == std::string_view::npos)
      name = host.substr(0, colon);
  }
  // "example.com." (the absolute form) is the same host as "example.com".
  if (name.size() > 1 && name.back() == '.' && name.front() != '[')
    name.remove_suffix(1);

  std::string out(name);
  for (auto& c : out)
    c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

}  // namespace waggle
