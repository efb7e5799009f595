// The URLs the outbound HTTP client may POST to (parse_http_url, declared in
// http_client.hpp), apart from the client itself.

#include "gateway/http_client.hpp"

#include <cctype>

#include <boost/asio/ip/address.hpp>
#include <boost/asio/ip/address_v6.hpp>
#include <boost/beast/core/string.hpp>

namespace waggle::gateway {

namespace beast = boost::beast;
namespace net = boost::asio;

namespace {

bool host_char_ok(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '.' || c == '_';
}

}  // namespace

std::optional<http_url> parse_http_url(std::string_view url) {
  // Nothing a parser elsewhere could read differently: no spaces, controls,
  // non-ASCII bytes, backslashes or fragments anywhere.
  for (char c : url) {
    auto u = static_cast<unsigned char>(c);
    if (u <= 0x20 || u >= 0x7f || c == '\\' || c == '#')
      return std::nullopt;
  }
  auto sep = url.find("://");
  if (sep == std::string_view::npos)
    return std::nullopt;
  http_url out;
  auto scheme = url.substr(0, sep);
  if (beast::iequals(scheme, "https"))
    out.tls = true;
  else if (!beast::iequals(scheme, "http"))
    return std::nullopt;
  auto rest = url.substr(sep + 3);
  auto end = rest.find_first_of("/?");
  auto authority = rest.substr(0, end);
  auto target = end == std::string_view::npos ? std::string_view{} : rest.substr(end);
  if (authority.find('@') != std::string_view::npos)
    return std::nullopt;

  std::string_view port;
  if (!authority.empty() && authority.front() == '[') {
    auto close = authority.find(']');
    if (close == std::string_view::npos)
      return std::nullopt;
    out.host = std::string(authority.substr(1, close - 1));
    beast::error_code ec;
    // A zone (%25eth0) names an interface of this machine: not a listener's.
    if (out.host.find('%') != std::string::npos)
      return std::nullopt;
    net::ip::make_address_v6(out.host, ec);
    if (ec)
      return std::nullopt;
    auto after = authority.substr(close + 1);
    if (!after.empty()) {
      if (after.front() != ':')
        return std::nullopt;
      port = after.substr(1);
      if (port.empty())
        return std::nullopt;
    }
  } else {
    auto colon = authority.find(':');
    out.host = std::string(authority.substr(0, colon));
    if (colon != std::string_view::npos) {
      port = authority.substr(colon + 1);
      if (port.empty())
        return std::nullopt;
    }
    for (char c : out.host)
      if (!host_char_ok(c))
        return std::nullopt;
  }
  if (out.host.empty())
    return std::nullopt;

  if (port.empty()) {
    out.port = out.tls ? 443 : 80;
  } else {
    if (port.size() > 5)
      return std::nullopt;
    unsigned value = 0;
    for (char c : port) {
      if (c < '0' || c > '9')
        return std::nullopt;
      value = value * 10 + unsigned(c - '0');
    }
    if (value < 1 || value > 65535)
      return std::nullopt;
    out.port = static_cast<uint16_t>(value);
  }

  if (target.empty())
    out.target = "/";
  else if (target.front() == '?')
    out.target = "/" + std::string(target);
  else
    out.target = std::string(target);
  return out;
}

}  // namespace waggle::gateway
