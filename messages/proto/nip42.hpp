#pragma once

// NIP-42: the `relay` tag of an AUTH event, parsed as a URL. Pure: no CAF, no
// sockets. The tag must name this relay, or a relay at a look-alike URL
// (`ws://ours:1@evil.example`, `ws://ours:1.evil.example`) could forward our
// challenge to its victims and replay their AUTH here.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "messages/proto/status.hpp"

namespace waggle::proto::nip42 {

struct relay_url {
  std::string scheme;            // lowercase: ws, wss, http or https
  std::string host;              // lowercase, no trailing dot; IPv6 keeps its brackets
  std::optional<uint16_t> port;  // when the URL names one (1-65535)
  std::string path;              // "" or starting with '/'
};

// scheme "://" host [":" port] [path]. Refused: another scheme, userinfo (an
// `@` anywhere in the authority), a host with anything but letters, digits,
// '-', '.', '_' (or a bracketed IPv6 address), a port that is not 1-65535 in
// decimal, and anything after the authority that is not a path ("?", "#").
result<relay_url> parse_relay_url(std::string_view url);

// The port a Host header value names ("chat.example:7777" -> 7777,
// "[::1]:80" -> 80), if it names a valid one.
std::optional<uint16_t> port_of_host(std::string_view host_header);

// The AUTH `relay` tag names this relay: its host equals `host` (the
// normalized Host header) and, when both the tag and the Host header name a
// port, the ports are equal. A tag without a port matches any port (as before
// the URL was parsed: behind a proxy the node does not know its public port).
status check_relay_tag(std::string_view url, std::string_view host,
                       std::optional<uint16_t> host_port);

}  // namespace waggle::proto::nip42
