// The SQL of NIP-86 management (db/management_store.hpp): bans, kind rules,
// blocked IPs, community text; what each does to the write path and to the
// membership it touches; bad input changes nothing.

#include "db/management_store.hpp"
#include "db/membership_store.hpp"
#include "tests/db/write_fixture.hpp"

namespace waggle::pgtest {
namespace {

class ManagementTest : public WriteTest {
 protected:
  template <class Fn>
  auto in_tx(Fn&& fn) {
    pqxx::work tx(conn());
    auto out = fn(tx);
    tx.commit();
    return out;
  }
  const std::string pk = proto::pubkey_of(secret(3));
  const std::string owner = proto::pubkey_of(secret(4));
};

TEST_F(ManagementTest, BanPubkeyRemovesTheMemberAndRefusesItsEvents) {
  auto c = community();
  ASSERT_TRUE(db::add_member(conn(), c, owner, member_role::owner, {}));
  ASSERT_TRUE(db::add_member(conn(), c, pk, member_role::member, {}));
  auto banned = in_tx([&](pqxx::work& tx) { return db::ban_pubkey(tx, c, pk, "spam", owner); });
  ASSERT_TRUE(banned.has_value()) << banned.error().reason;
  auto listed = in_tx([&](pqxx::work& tx) { return db::list_banned_pubkeys(tx, c); });
  ASSERT_EQ(listed.size(), 1u);
  EXPECT_EQ(listed[0].key, pk);
  EXPECT_EQ(listed[0].reason, "spam");
  auto members = in_tx([&](pqxx::work& tx) { return db::list_allowed_pubkeys(tx, c); });
  ASSERT_EQ(members.size(), 1u);
  EXPECT_EQ(members[0].key, owner);
  EXPECT_EQ(members[0].reason, "owner");
  EXPECT_EQ(write1(c, make_event(3, 1, wall_now(), {}, "banned")), write_outcome::blocked);
  EXPECT_TRUE(in_tx([&](pqxx::work& tx) { return db::unban_pubkey(tx, c, pk); }));
  EXPECT_TRUE(in_tx([&](pqxx::work& tx) { return db::list_banned_pubkeys(tx, c); }).empty());
}

TEST_F(ManagementTest, TheLastOwnerCannotBeBanned) {
  auto c = community();
  ASSERT_TRUE(db::add_member(conn(), c, owner, member_role::owner, {}));
  auto r = in_tx([&](pqxx::work& tx) { return db::ban_pubkey(tx, c, owner, "", owner); });
  EXPECT_FALSE(r.has_value());
  EXPECT_TRUE(in_tx([&](pqxx::work& tx) { return db::list_banned_pubkeys(tx, c); }).empty());
}

TEST_F(ManagementTest, BanEventDeletesItAndRefusesAResend) {
  auto c = community();
  auto ev = make_event(3, 1, wall_now(), {}, "to ban");
  ASSERT_EQ(write1(c, ev), write_outcome::stored);
  in_tx([&](pqxx::work& tx) { return db::ban_event(tx, c, ev.id, "off-topic", owner); });
  EXPECT_FALSE(is_live(c, ev.id));
  EXPECT_EQ(write1(c, ev), write_outcome::blocked);
  auto listed = in_tx([&](pqxx::work& tx) { return db::list_banned_events(tx, c); });
  ASSERT_EQ(listed.size(), 1u);
  EXPECT_EQ(listed[0].key, ev.id);
  EXPECT_TRUE(in_tx([&](pqxx::work& tx) { return db::unban_event(tx, c, ev.id); }));
  EXPECT_FALSE(is_live(c, ev.id)) << "unbanning does not restore";
}

TEST_F(ManagementTest, KindRulesAreUpserted) {
  auto c = community();
  in_tx([&](pqxx::work& tx) { db::set_kind_rule(tx, c, 7, false); return 0; });
  in_tx([&](pqxx::work& tx) { db::set_kind_rule(tx, c, 1, true); return 0; });
  in_tx([&](pqxx::work& tx) { db::set_kind_rule(tx, c, 7, true); return 0; });
  EXPECT_EQ(in_tx([&](pqxx::work& tx) { return db::list_kinds(tx, c, true); }),
            (std::vector<int32_t>{1, 7}));
  EXPECT_TRUE(in_tx([&](pqxx::work& tx) { return db::list_kinds(tx, c, false); }).empty());
  EXPECT_EQ(write1(c, make_event(3, 42, wall_now(), {}, "not allowed")), write_outcome::blocked);
  EXPECT_EQ(write1(c, make_event(3, 1, wall_now(), {}, "allowed")), write_outcome::stored);
}

TEST_F(ManagementTest, BlockedIpsAreCanonicalAndBadOnesChangeNothing) {
  auto c = community();
  ASSERT_TRUE(in_tx([&](pqxx::work& tx) { return db::block_ip(tx, c, "::ffff:10.0.0.1", "x", owner); }).has_value());
  ASSERT_TRUE(in_tx([&](pqxx::work& tx) { return db::block_ip(tx, c, "2001:DB8::1", "", {}); }).has_value());
  pqxx::work tx(conn());
  EXPECT_FALSE(db::block_ip(tx, c, "not-an-ip", "", {}).has_value());
  EXPECT_FALSE(db::block_ip(tx, c, "10.0.0.0/8", "", {}).has_value());
  auto listed = db::list_blocked_ips(tx, c);  // the transaction is still usable
  tx.commit();
  ASSERT_EQ(listed.size(), 2u);
  EXPECT_EQ(listed[0].key, "10.0.0.1");
  EXPECT_EQ(listed[1].key, "2001:db8::1");
  auto all = db::load_blocked_ips(conn());
  EXPECT_EQ(all[c], (std::vector<std::string>{"10.0.0.1", "2001:db8::1"}));
  EXPECT_TRUE(*in_tx([&](pqxx::work& t) { return db::unblock_ip(t, c, "10.0.0.1"); }));
  EXPECT_EQ(db::load_blocked_ips(conn())[c], (std::vector<std::string>{"2001:db8::1"}));
}

TEST_F(ManagementTest, CommunityTextAndPolicy) {
  auto c = community();
  in_tx([&](pqxx::work& tx) { return db::set_community_text(tx, c, "name", "Renamed"); });
  in_tx([&](pqxx::work& tx) { return db::set_community_text(tx, c, "description", "About"); });
  in_tx([&](pqxx::work& tx) { return db::set_community_text(tx, c, "icon", "https://x/i.png"); });
  EXPECT_FALSE(in_tx([&](pqxx::work& tx) { return db::set_community_text(tx, c, "host", "evil"); }));
  EXPECT_TRUE(in_tx([&](pqxx::work& tx) { return db::set_policy(tx, c, community_policy::invite); }));
  for (const auto& row : db::load_communities(conn()))
    if (row.id == c) {
      EXPECT_EQ(row.name, "Renamed");
      EXPECT_EQ(row.description, "About");
      EXPECT_EQ(row.icon, "https://x/i.png");
      EXPECT_EQ(row.policy, community_policy::invite);
    }
}

}  // namespace
}  // namespace waggle::pgtest
