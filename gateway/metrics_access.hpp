#pragma once

// Who may read /metrics. The page is node-wide (every community's counters),
// so by default only the host itself may (`--metrics-allow`). A pure decision
// on the peer's address, tested without sockets.

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace waggle::gateway {

struct metrics_access {
  enum class mode { loopback, any, list } allow = mode::loopback;
  std::vector<std::string> addresses;  // mode::list: canonical IP text
};

// "loopback", "any" or a comma-separated list of IPv4/IPv6 addresses (spaces
// around commas ignored). Anything else, or an empty list, is nullopt.
std::optional<metrics_access> parse_metrics_allow(std::string_view spec);

// True when a peer at `peer_ip` (as the sessions see it; IPv4-mapped IPv6 is
// read as IPv4) may read /metrics. An unreadable or empty address never may,
// except under `any`.
bool metrics_allowed(const metrics_access& access, std::string_view peer_ip);

}  // namespace waggle::gateway
