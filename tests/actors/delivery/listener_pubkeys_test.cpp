// Parsing a listener registration's body (messages/delivery.hpp).

#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "messages/delivery.hpp"

using namespace waggle;

TEST(ListenerPubkeys, AKeyListParses) {
  std::vector<std::string> keys;
  std::string why;
  const std::string key(64, 'a');
  ASSERT_TRUE(parse_listener_pubkeys("{\"pubkeys\":[\"" + key + "\"]}", 10, keys, why)) << why;
  EXPECT_EQ(keys, std::vector<std::string>{key});
}

// The body may be 128 KiB (gateway/http_session.hpp): nested that deep, the
// recursive parser it used ran the worker thread out of stack and took the
// node down. With kParseIterativeFlag removed this test crashes.
TEST(ListenerPubkeys, ABodyNestedAsDeepAsItMayBeLongIsRefusedNotACrash) {
  std::vector<std::string> keys;
  std::string why;
  for (auto open : {'[', '{'}) {
    std::string deep(128u << 10, open);
    EXPECT_FALSE(parse_listener_pubkeys(deep, 10, keys, why));
    EXPECT_EQ(why, "the body is not a JSON object");
  }
  std::string deep_array = "{\"pubkeys\":" + std::string((128u << 10) - 12, '[');
  EXPECT_FALSE(parse_listener_pubkeys(deep_array, 10, keys, why));
}
