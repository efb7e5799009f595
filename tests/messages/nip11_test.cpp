// NIP-11 as a pure function (messages/proto/nip11.hpp): the document parses and
// carries what the node put in it.

#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <rapidjson/document.h>

#include "messages/proto/client_message.hpp"
#include "messages/proto/nip11.hpp"

namespace waggle {
namespace {

proto::relay_info sample() {
  proto::relay_info info;
  info.name = "team \"bees\"";
  info.description = "chat";
  info.pubkey = std::string(64, 'a');
  info.max_message_length = 65536;
  info.max_subscriptions = 64;
  info.max_filters = 10;
  info.max_limit = 500;
  info.default_limit = 100;
  info.max_subscription_bytes = 1u << 20;
  info.max_subscription_bytes_total = 256u << 20;
  info.max_history_bytes_per_connection = 16u << 20;
  info.max_auth_keys = 16;
  info.created_at_window = 900;
  info.max_reads_in_flight = 8;
  info.read_tokens_per_second = 1000;
  info.read_token_burst = 2000;
  return info;
}

rapidjson::Document parse(const std::string& json) {
  rapidjson::Document doc;
  doc.Parse(json.c_str(), json.size());
  EXPECT_FALSE(doc.HasParseError()) << json;
  EXPECT_TRUE(doc.IsObject()) << json;
  return doc;
}

std::vector<int> nips(const rapidjson::Document& doc) {
  std::vector<int> out;
  for (const auto& v : doc["supported_nips"].GetArray())
    out.push_back(v.GetInt());
  return out;
}

TEST(Nip11, CarriesTheIdentityAndTheLimits) {
  auto doc = parse(proto::relay_info_json(sample()));
  EXPECT_STREQ(doc["name"].GetString(), "team \"bees\"");
  EXPECT_STREQ(doc["description"].GetString(), "chat");
  EXPECT_FALSE(doc.HasMember("icon"));
  EXPECT_EQ(doc["pubkey"].GetString(), std::string(64, 'a'));
  EXPECT_STREQ(doc["software"].GetString(), "waggle");
  ASSERT_TRUE(doc["limitation"].IsObject());
  const auto& lim = doc["limitation"];
  EXPECT_EQ(lim["max_message_length"].GetUint64(), 65536u);
  EXPECT_EQ(lim["max_subscriptions"].GetUint64(), 64u);
  EXPECT_EQ(lim["max_filters"].GetUint64(), 10u);
  EXPECT_EQ(lim["max_limit"].GetUint(), 500u);
  EXPECT_EQ(lim["default_limit"].GetUint(), 100u);
  EXPECT_EQ(lim["max_subid_length"].GetUint64(), proto::max_subscription_id_len);
  EXPECT_TRUE(lim["auth_required"].GetBool());
  EXPECT_TRUE(lim["restricted_writes"].GetBool());
  EXPECT_EQ(lim["created_at_lower_limit"].GetInt64(), 900);
  EXPECT_EQ(lim["created_at_upper_limit"].GetInt64(), 900);
  EXPECT_EQ(lim["max_subscription_bytes"].GetUint64(), 1u << 20);
  EXPECT_EQ(lim["max_subscription_bytes_total"].GetUint64(), 256u << 20);
  EXPECT_EQ(lim["max_history_bytes_per_connection"].GetUint64(), 16u << 20);
  EXPECT_EQ(lim["max_auth_keys"].GetUint64(), 16u);
  EXPECT_EQ(lim["max_reads_in_flight"].GetUint64(), 8u);
  EXPECT_EQ(lim["read_tokens_per_second"].GetInt64(), 1000);
  EXPECT_EQ(lim["read_token_burst"].GetInt64(), 2000);
}

TEST(Nip11, OffersNip43AndNip50OnlyWhenAsked) {
  auto info = sample();
  EXPECT_EQ(nips(parse(proto::relay_info_json(info))),
            (std::vector<int>{1, 9, 11, 29, 40, 42, 45, 86, 98}));
  info.nip43 = true;
  info.search = true;
  EXPECT_EQ(nips(parse(proto::relay_info_json(info))),
            (std::vector<int>{1, 9, 11, 29, 40, 42, 43, 45, 50, 86, 98}));
}

// Issue 34: a replica's proof covers rows written, not rows removed; with
// replicas the document says for how long a deleted event may still be read.
TEST(Nip11, StatesHowLongAReplicaMayShowARemovedEventOnlyWithReplicas) {
  auto info = sample();
  auto without = parse(proto::relay_info_json(info));
  EXPECT_FALSE(without["limitation"].HasMember("replica_stale_removals_seconds"));
  info.replica_stale_removals_seconds = 60;
  auto with = parse(proto::relay_info_json(info));
  ASSERT_TRUE(with["limitation"].HasMember("replica_stale_removals_seconds"));
  EXPECT_EQ(with["limitation"]["replica_stale_removals_seconds"].GetInt64(), 60);
}

TEST(Nip11, AnIconIsSentWhenSet) {
  auto info = sample();
  info.icon = "https://example.com/bee.png";
  auto doc = parse(proto::relay_info_json(info));
  EXPECT_STREQ(doc["icon"].GetString(), "https://example.com/bee.png");
}

}  // namespace
}  // namespace waggle
