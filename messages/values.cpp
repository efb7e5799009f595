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

namespace waggle {

std::string_view name_of(community_policy p) {
  switch (p) {
    case community_policy::open: return "open";
    case community_policy::closed: return "closed";
    case community_policy::invite: return "invite";
  }
  return "closed";
}

std::optional<community_policy> parse_community_policy(std::string_view text) {
  for (auto p : {community_policy::open, community_policy::closed, community_policy::invite})
    if (name_of(p) == text)
      return p;
  return std::nullopt;
}

std::string_view name_of(member_role r) {
  switch (r) {
    case member_role::owner: return "owner";
    case member_role::admin: return "admin";
    case member_role::member: return "member";
  }
  return "member";
}

std::optional<member_role> parse_member_role(std::string_view text) {
  for (auto r : {member_role::owner, member_role::admin, member_role::member})
    if (name_of(r) == text)
      return r;
  return std::nullopt;
}

}  // namespace waggle

namespace waggle {

std::string_view unmapped_ip(std::string_view ip) {
  if (ip.substr(0, 7) == "::ffff:" && ip.find('.') != std::string_view::npos)
    ip.remove_prefix(7);
  return ip;
}

bool community::blocks(std::string_view ip) const {
  if (blocked_ips.empty() || ip.empty())
    return false;
  // The gateway maps already; callers may not.
  ip = unmapped_ip(ip);
  for (const auto& b : blocked_ips)
    if (b == ip)
      return true;
  return false;
}

}  // namespace waggle
