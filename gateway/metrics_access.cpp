#include "gateway/metrics_access.hpp"

#include <boost/asio/ip/address.hpp>

#include "messages/proto/text.hpp"

namespace waggle::gateway {

namespace {

namespace ip = boost::asio::ip;

std::optional<ip::address> address_of(std::string_view text) {
  boost::system::error_code ec;
  auto a = ip::make_address(std::string(text), ec);
  if (ec)
    return std::nullopt;
  if (a.is_v6() && a.to_v6().is_v4_mapped())
    a = ip::make_address_v4(ip::v4_mapped, a.to_v6());
  return a;
}

}  // namespace

std::optional<metrics_access> parse_metrics_allow(std::string_view spec) {
  spec = proto::trim(spec);
  if (spec == "loopback")
    return metrics_access{};
  if (spec == "any")
    return metrics_access{metrics_access::mode::any, {}};
  metrics_access out{metrics_access::mode::list, {}};
  while (!spec.empty()) {
    auto comma = spec.find(',');
    auto item = proto::trim(spec.substr(0, comma));
    spec = comma == std::string_view::npos ? std::string_view{} : spec.substr(comma + 1);
    if (item.empty())
      continue;
    auto a = address_of(item);
    if (!a)
      return std::nullopt;
    out.addresses.push_back(a->to_string());
  }
  if (out.addresses.empty())
    return std::nullopt;
  return out;
}

bool metrics_allowed(const metrics_access& access, std::string_view peer_ip) {
  if (access.allow == metrics_access::mode::any)
    return true;
  auto a = address_of(peer_ip);
  if (!a)
    return false;
  if (access.allow == metrics_access::mode::loopback)
    return a->is_loopback();
  auto text = a->to_string();
  for (auto& allowed : access.addresses)
    if (allowed == text)
      return true;
  return false;
}

}  // namespace waggle::gateway
