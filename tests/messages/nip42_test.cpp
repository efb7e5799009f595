// The NIP-42 `relay` tag, parsed as a URL (issue 13, finding 7). Red check: on
// the base code the tag's host was "everything after ://, up to / or ?, minus
// what normalize_host takes for a port", so the first three refusals below
// were read as host `localhost` and accepted.

#include <gtest/gtest.h>

#include "messages/proto/nip42.hpp"

namespace {

using namespace waggle;
using namespace waggle::proto::nip42;

constexpr std::optional<uint16_t> port_17777 = 17777;

void refused(std::string_view url, std::string_view why) {
  auto st = check_relay_tag(url, "localhost", port_17777);
  EXPECT_EQ(st.code, ec::invalid) << url;
  EXPECT_NE(st.reason.find(why), std::string::npos) << url << ": " << st.reason;
}

TEST(Nip42RelayTag, LookAlikeUrlsAreRefused) {
  refused("ws://localhost:17777@evil.example", "userinfo");
  refused("ws://localhost:17777.evil.example", "port must be a number");
  refused("ws://localhost:evil", "port must be a number");
  refused("ws://user@localhost:17777", "userinfo");
  refused("ws://user:pw@localhost:17777/", "userinfo");
  refused("ws://localhost:17777?x=1", "other than a path");
  refused("ws://localhost:17777#frag", "other than a path");
  refused("ws://localhost:0", "port must be a number");
  refused("ws://localhost:65536", "port must be a number");
  refused("ws://localhost:+17777", "port must be a number");
  refused("ws://localhost:", "port must be a number");
  refused("ws://local%68ost:17777", "malformed host");
  refused("ws://:17777", "no host");
  refused("localhost:17777", "no scheme");
  refused("ftp://localhost:17777", "scheme");
  refused("ws://evil.example:17777", "host");
  refused("ws://localhost.evil.example:17777", "host");
  refused("ws://localhost:17778", "port");
}

TEST(Nip42RelayTag, TheRelaysOwnUrlIsAccepted) {
  for (auto url : {"ws://localhost:17777", "wss://LOCALHOST:17777/", "ws://localhost:17777/path",
                   "WS://localhost:17777", "ws://localhost./", "https://localhost:17777",
                   // No port in the tag: any port, as before (documented).
                   "ws://localhost", "wss://localhost/"})
    EXPECT_TRUE(check_relay_tag(url, "localhost", port_17777).ok()) << url;
  // A Host header without a port: the tag's port is not compared.
  EXPECT_TRUE(check_relay_tag("wss://localhost:443", "localhost", std::nullopt).ok());
}

TEST(Nip42RelayTag, Ipv6Hosts) {
  EXPECT_TRUE(check_relay_tag("ws://[::1]:7777/", "[::1]", 7777).ok());
  EXPECT_TRUE(check_relay_tag("ws://[FE80::1]", "[fe80::1]", 7777).ok());
  EXPECT_FALSE(check_relay_tag("ws://[::1]x:7777", "[::1]", 7777).ok());
  EXPECT_FALSE(check_relay_tag("ws://[::1@evil]:7777", "[::1]", 7777).ok());
  EXPECT_FALSE(check_relay_tag("ws://[::1]:7778", "[::1]", 7777).ok());
}

TEST(Nip42RelayTag, ParsedParts) {
  auto u = parse_relay_url("WSS://Chat.Example:443/a/b");
  ASSERT_TRUE(u);
  EXPECT_EQ(u->scheme, "wss");
  EXPECT_EQ(u->host, "chat.example");
  EXPECT_EQ(u->port, std::optional<uint16_t>(443));
  EXPECT_EQ(u->path, "/a/b");
  auto bare = parse_relay_url("ws://chat.example");
  ASSERT_TRUE(bare);
  EXPECT_FALSE(bare->port);
  EXPECT_EQ(bare->path, "");
}

TEST(Nip42RelayTag, PortOfHostHeader) {
  EXPECT_EQ(port_of_host("localhost:17777"), std::optional<uint16_t>(17777));
  EXPECT_EQ(port_of_host(" [::1]:80 "), std::optional<uint16_t>(80));
  EXPECT_EQ(port_of_host("localhost"), std::nullopt);
  EXPECT_EQ(port_of_host("::1"), std::nullopt);
  EXPECT_EQ(port_of_host("localhost:x"), std::nullopt);
  EXPECT_EQ(port_of_host("[::1]"), std::nullopt);
}

}  // namespace
