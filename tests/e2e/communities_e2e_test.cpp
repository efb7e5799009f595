// Closed communities end to end (docs/communities.md), issue 12 must-show 1
// and the NIP-43 invite round trip of must-show 2 over the wire.

#include <gtest/gtest.h>

#include "db/community_store.hpp"
#include "db/membership_store.hpp"
#include "tests/e2e/node_fixture.hpp"

namespace waggle::e2e {
namespace {

using namespace std::chrono_literals;

class communities_e2e : public node_e2e {
 protected:
  int64_t make_community(const std::string& host, community_policy policy) {
    auto conn = db_->connect();
    auto c = db::add_community(*conn, host, "", policy);
    EXPECT_TRUE(c.has_value());
    return c ? c->id : 0;
  }
  // The directory refreshes every 2 s; a host is served once it is in the map.
  void wait_for_host(const std::string& host) {
    for (int i = 0; i < 100; ++i) {
      gateway::ws_client probe;
      if (probe.connect("127.0.0.1", port_, host) && probe.read_text(1s))
        return;
      std::this_thread::sleep_for(100ms);
    }
    FAIL() << host << " never served";
  }
  // The next frame for `sub` (CLOSED, EVENT...), skipping others.
  std::optional<std::string> next_for(gateway::ws_client& c, const std::string& sub,
                                      std::chrono::seconds within = 10s) {
    auto until = std::chrono::steady_clock::now() + within;
    while (std::chrono::steady_clock::now() < until)
      if (auto f = c.read_text(1s); f && f->find("\"" + sub + "\"") != std::string::npos)
        return f;
    return std::nullopt;
  }
  int64_t stored_by(int64_t community_id, const std::string& sk) {
    auto conn = db_->connect();
    pqxx::nontransaction tx(*conn);
    return tx.exec_params("SELECT count(*) FROM events WHERE community_id = $1 "
                          "AND pubkey = decode($2, 'hex')",
                          community_id, proto::pubkey_of(sk))[0][0]
      .as<int64_t>();
  }
  const std::string carol = pgtest::secret(13);
  const std::string dave = pgtest::secret(14);
};

TEST_F(communities_e2e, AStrangerIsRefusedEverythingUntilAllowedAndLosesItWhenRemoved) {
  auto c = make_community("closed.test", community_policy::closed);
  {
    auto conn = db_->connect();
    ASSERT_TRUE(db::add_member(*conn, c, proto::pubkey_of(alice), member_role::owner, "").has_value());
  }
  wait_for_host("closed.test");
  auto owner = login("closed.test", alice);
  ASSERT_TRUE(history(*owner, "watch", R"({"kinds":[1,20001]})").empty());

  auto stranger = login("closed.test", bob);  // AUTH succeeds
  EXPECT_NE(publish(*stranger, signed_event(bob, 1, "hello?")).find(
              "false,\"restricted: not a member of this community\""), std::string::npos);
  EXPECT_NE(publish(*stranger, signed_event(bob, 20001, "typing")).find("false,\"restricted:"),
            std::string::npos);
  EXPECT_NE(publish(*stranger, signed_event(bob, 9007, "", {{"h", "ops"}})).find(
              "false,\"restricted:"), std::string::npos);
  auto req = history(*stranger, "s", "{}");
  ASSERT_EQ(req.size(), 1u);
  EXPECT_EQ(req[0], "CLOSED:restricted: not a member of this community");
  stranger->send_text(R"(["COUNT","n",{}])");
  auto count = next_for(*stranger, "n");
  ASSERT_TRUE(count);
  EXPECT_NE(count->find("CLOSED"), std::string::npos) << *count;
  auto over_http = post_event("closed.test", bob, signed_event(bob, 1, "over http?"));
  EXPECT_EQ(over_http.status, 403u) << over_http.body;
  EXPECT_NE(over_http.body.find("restricted: not a member of this community"), std::string::npos)
    << over_http.body;
  EXPECT_EQ(stored_by(c, bob), 0);
  // Nothing reached the owner's live subscription either.
  EXPECT_FALSE(owner->read_text(300ms));

  {  // allowpubkey
    auto conn = db_->connect();
    ASSERT_TRUE(db::add_member(*conn, c, proto::pubkey_of(bob), member_role::member, "").has_value());
  }
  auto ok = publish(*stranger, signed_event(bob, 1, "now a member"));
  EXPECT_NE(ok.find(",true,"), std::string::npos) << ok;
  EXPECT_TRUE(history(*stranger, "live", R"({"kinds":[1]})").size() >= 1);

  {  // unallowpubkey: the open subscription ends at once
    auto conn = db_->connect();
    ASSERT_TRUE(db::remove_member(*conn, c, proto::pubkey_of(bob), "").has_value());
  }
  auto closed = next_for(*stranger, "live");
  ASSERT_TRUE(closed) << "the subscription was not ended";
  EXPECT_NE(closed->find("[\"CLOSED\",\"live\",\"restricted: not a member of this community\"]"),
            std::string::npos) << *closed;
  auto refused = publish(*stranger, signed_event(bob, 1, "still here?"));
  EXPECT_NE(refused.find(",false,"), std::string::npos) << refused;
  EXPECT_EQ(stored_by(c, bob), 1);
}

TEST_F(communities_e2e, AnInviteRoundTripLetsANewKeyIn) {
  auto c = make_community("invite.test", community_policy::invite);
  {
    auto conn = db_->connect();
    ASSERT_TRUE(db::add_member(*conn, c, proto::pubkey_of(alice), member_role::owner, "").has_value());
  }
  wait_for_host("invite.test");
  auto admin = login("invite.test", alice);
  admin->send_text(R"(["REQ","inv",{"kinds":[28935]}])");
  std::string code;
  while (auto f = next_for(*admin, "inv")) {
    auto d = parse(*f);
    if (std::string(d[0].GetString()) == "EVENT") {
      ASSERT_EQ(d[2]["kind"].GetInt(), 28935);
      EXPECT_EQ(std::string(d[2]["pubkey"].GetString()), node_->relay_pubkey());
      for (auto& t : d[2]["tags"].GetArray())
        if (std::string(t[0].GetString()) == "claim")
          code = t[1].GetString();
      break;
    }
  }
  ASSERT_FALSE(code.empty()) << "no invite";

  auto newcomer = login("invite.test", carol);
  auto claimed = publish(*newcomer, signed_event(carol, 28934, "", {{"-"}, {"claim", code}}));
  EXPECT_NE(claimed.find(",true,\"claim-accepted:"), std::string::npos) << claimed;
  EXPECT_NE(publish(*newcomer, signed_event(carol, 1, "hi team")).find(",true,"), std::string::npos);

  auto late = login("invite.test", dave);
  auto reused = publish(*late, signed_event(dave, 28934, "", {{"-"}, {"claim", code}}));
  EXPECT_NE(reused.find(",false,\"restricted:"), std::string::npos) << reused;

  // The relay's 13534 lists the newcomer (published by the watcher after the claim).
  bool listed = false;
  for (int i = 0; i < 50 && !listed; ++i) {
    auto ids = history(*admin, "list" + std::to_string(i), R"({"kinds":[13534]})");
    auto conn = db_->connect();
    pqxx::nontransaction tx(*conn);
    auto r = tx.exec_params("SELECT raw FROM events WHERE community_id = $1 AND kind = 13534 "
                            "AND deleted_at IS NULL", c);
    listed = !ids.empty() && !r.empty()
             && r[0][0].as<std::string>().find(proto::pubkey_of(carol)) != std::string::npos;
    if (!listed)
      std::this_thread::sleep_for(100ms);
  }
  EXPECT_TRUE(listed);
}

}  // namespace
}  // namespace waggle::e2e
