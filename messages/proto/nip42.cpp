#include "messages/proto/nip42.hpp"

#include <cctype>

namespace waggle::proto::nip42 {

namespace {

std::string lower(std::string_view s) {
  std::string out(s);
  for (auto& c : out)
    c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

status bad(std::string why) { return {ec::invalid, "AUTH relay tag " + std::move(why)}; }

// Decimal 1-65535, nothing else (no sign, no spaces, no hex).
std::optional<uint16_t> parse_port(std::string_view s) {
  if (s.empty() || s.size() > 5)
    return std::nullopt;
  uint32_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9')
      return std::nullopt;
    v = v * 10 + static_cast<uint32_t>(c - '0');
  }
  if (v == 0 || v > 65535)
    return std::nullopt;
  return static_cast<uint16_t>(v);
}

bool reg_name_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '.' || c == '_';
}

bool ipv6_char(char c) {
  return std::isxdigit(static_cast<unsigned char>(c)) || c == ':' || c == '.';
}

}  // namespace

result<relay_url> parse_relay_url(std::string_view url) {
  auto sep = url.find("://");
  if (sep == std::string_view::npos)
    return bad("is not a URL (no scheme)");
  relay_url out;
  out.scheme = lower(url.substr(0, sep));
  if (out.scheme != "ws" && out.scheme != "wss" && out.scheme != "http" && out.scheme != "https")
    return bad("scheme must be ws or wss");
  auto rest = url.substr(sep + 3);
  auto end = rest.find_first_of("/?#");
  auto authority = rest.substr(0, end);
  auto after = end == std::string_view::npos ? std::string_view{} : rest.substr(end);
  if (!after.empty() && after.front() != '/')
    return bad("has something other than a path after the host and port");
  out.path = std::string(after);
  if (authority.find('@') != std::string_view::npos)
    return bad("must not carry userinfo (@)");
  std::string_view host = authority;
  std::string_view port;
  bool has_port = false;
  if (!authority.empty() && authority.front() == '[') {
    auto close = authority.find(']');
    if (close == std::string_view::npos || close == 1)
      return bad("has a malformed IPv6 address");
    for (char c : authority.substr(1, close - 1))
      if (!ipv6_char(c))
        return bad("has a malformed IPv6 address");
    host = authority.substr(0, close + 1);
    auto tail = authority.substr(close + 1);
    if (!tail.empty()) {
      if (tail.front() != ':')
        return bad("has something other than a port after the host");
      has_port = true;
      port = tail.substr(1);
    }
  } else {
    auto colon = authority.find(':');
    if (colon != std::string_view::npos) {
      host = authority.substr(0, colon);
      has_port = true;
      port = authority.substr(colon + 1);
    }
    if (host.empty())
      return bad("has no host");
    for (char c : host)
      if (!reg_name_char(c))
        return bad("has a malformed host");
  }
  if (has_port) {
    auto p = parse_port(port);
    if (!p)
      return bad("port must be a number from 1 to 65535");
    out.port = *p;
  }
  out.host = lower(host);
  // "example.com." is the absolute form of "example.com" (as normalize_host).
  if (out.host.size() > 1 && out.host.back() == '.' && out.host.front() != '[')
    out.host.pop_back();
  return out;
}

std::optional<uint16_t> port_of_host(std::string_view h) {
  while (!h.empty() && std::isspace(static_cast<unsigned char>(h.front())))
    h.remove_prefix(1);
  while (!h.empty() && std::isspace(static_cast<unsigned char>(h.back())))
    h.remove_suffix(1);
  std::string_view port;
  if (!h.empty() && h.front() == '[') {
    auto close = h.find(']');
    if (close == std::string_view::npos || close + 1 >= h.size() || h[close + 1] != ':')
      return std::nullopt;
    port = h.substr(close + 2);
  } else {
    auto colon = h.find(':');
    // More than one colon: an unbracketed IPv6 address, which has no port.
    if (colon == std::string_view::npos || h.find(':', colon + 1) != std::string_view::npos)
      return std::nullopt;
    port = h.substr(colon + 1);
  }
  return parse_port(port);
}

status check_relay_tag(std::string_view url, std::string_view host,
                       std::optional<uint16_t> host_port) {
  auto parsed = parse_relay_url(url);
  if (!parsed)
    return parsed.error();
  if (parsed->host != host)
    return bad("does not name this relay's host");
  if (parsed->port && host_port && *parsed->port != *host_port)
    return bad("does not name this relay's port");
  return {};
}

}  // namespace waggle::proto::nip42
