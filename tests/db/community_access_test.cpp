// Community access (docs/communities.md): the write path refuses strangers,
// bans and kind rules; the reader's facts; NIP-43 invites; and the lock that
// orders a membership change against the capture of a 13534.

#include <future>

#include <gtest/gtest.h>

#include "tests/db/channel_fixture.hpp"
#include "db/advisory_locks.hpp"
#include "db/community_store.hpp"
#include "db/event_store.hpp"
#include "db/membership_store.hpp"

namespace waggle::pgtest {
namespace {

class CommunityAccessTest : public PgTest {
 protected:
  int64_t closed_community(community_policy policy = community_policy::closed) {
    auto id = community("closed");
    pqxx::work tx(conn());
    tx.exec_params("UPDATE communities SET policy = $2 WHERE id = $1", id,
                   std::string(name_of(policy)));
    tx.commit();
    return id;
  }
  db::relay_signer relay() { return {secret(900), pk(900)}; }
  write_outcome post(int64_t c, int signer, int32_t kind = 1) {
    static int n = 0;
    ++n;
    auto ev = make_event(signer, kind, wall_now() - 100 + (n % 50), {}, "hello " + std::to_string(n));
    return db::write_batch_bisecting(conn(), batch(c, {ev}))[0].outcome;
  }
};

TEST_F(CommunityAccessTest, AStrangerIsRefusedAndAMemberIsNot) {
  auto c = closed_community();
  EXPECT_EQ(post(c, 1), write_outcome::refused);
  EXPECT_EQ(live_rows(c), 0);
  ASSERT_TRUE(db::add_member(conn(), c, pk(1), member_role::member, "").has_value());
  EXPECT_EQ(post(c, 1), write_outcome::stored);
  ASSERT_TRUE(db::remove_member(conn(), c, pk(1), "").has_value());
  EXPECT_EQ(post(c, 1), write_outcome::refused);
}

TEST_F(CommunityAccessTest, AStrangerCannotLearnThatAnIdIsStored) {
  auto c = closed_community();
  ASSERT_TRUE(db::add_member(conn(), c, pk(1), member_role::member, "").has_value());
  auto ev = make_event(1, 1, wall_now(), {}, "members only");
  ASSERT_EQ(db::write_batch_bisecting(conn(), batch(c, {ev}))[0].outcome, write_outcome::stored);
  ASSERT_TRUE(db::remove_member(conn(), c, pk(1), "").has_value());
  // The same event again, by a key that is no longer a member: refused, not "duplicate".
  EXPECT_EQ(db::write_batch_bisecting(conn(), batch(c, {ev}))[0].outcome, write_outcome::refused);
}

TEST_F(CommunityAccessTest, BansAndKindRulesAreBlockedEvenInAnOpenCommunity) {
  auto c = community("open");
  EXPECT_EQ(post(c, 2), write_outcome::stored);
  {
    pqxx::work tx(conn());
    tx.exec_params("INSERT INTO community_banned_pubkeys (community_id, pubkey) "
                   "VALUES ($1, decode($2, 'hex'))", c, pk(2));
    tx.exec_params("INSERT INTO community_kinds (community_id, kind, allowed) VALUES ($1, 7, false)", c);
    tx.commit();
  }
  EXPECT_EQ(post(c, 2), write_outcome::blocked);
  EXPECT_EQ(post(c, 3, 7), write_outcome::blocked);
  EXPECT_EQ(post(c, 3, 1), write_outcome::stored);
  {
    pqxx::work tx(conn());
    tx.exec_params("INSERT INTO community_kinds (community_id, kind, allowed) VALUES ($1, 9, true)", c);
    tx.commit();
  }
  // With an allow list, only its kinds.
  EXPECT_EQ(post(c, 3, 1), write_outcome::blocked);
  EXPECT_EQ(post(c, 3, 9), write_outcome::stored);
}

TEST_F(CommunityAccessTest, TheRelaysOwnStateIsExempt) {
  auto c = closed_community();
  ASSERT_TRUE(db::add_member(conn(), c, pk(1), member_role::owner, "").has_value());
  auto pub = db::publish_access_changes(conn(), c, relay(), wall_now());
  // 8000 for the owner and the 13534 list, both by the relay, a non-member.
  ASSERT_EQ(pub.events.size(), 2u);
  EXPECT_EQ(pub.events[0]->kind, 8000);
  EXPECT_EQ(pub.events[1]->kind, 13534);
  EXPECT_EQ(pub.members, std::vector<std::string>{pk(1)});
}

TEST_F(CommunityAccessTest, ReadFactsNameMembersAndGuestsButNeverBannedKeys) {
  auto c = closed_community();
  ASSERT_TRUE(db::add_member(conn(), c, pk(1), member_role::member, "").has_value());
  {
    pqxx::work tx(conn());
    tx.exec_params("INSERT INTO community_banned_pubkeys (community_id, pubkey) "
                   "VALUES ($1, decode($2, 'hex'))", c, pk(3));
    tx.commit();
  }
  auto a = db::read_community_access(conn(), c, {pk(1), pk(2), pk(3)});
  EXPECT_TRUE(a.exists);
  EXPECT_EQ(a.policy, community_policy::closed);
  EXPECT_EQ(a.members, std::vector<std::string>{pk(1)});
  EXPECT_EQ(a.guests, std::vector<std::string>{pk(2)});
}

TEST_F(CommunityAccessTest, AnInviteCodeIsSingleUseAndExpires) {
  auto c = closed_community(community_policy::invite);
  ASSERT_TRUE(db::add_member(conn(), c, pk(1), member_role::admin, "").has_value());
  auto now = wall_now();
  // A member that is not an admin may not invite.
  ASSERT_TRUE(db::add_member(conn(), c, pk(4), member_role::member, "").has_value());
  EXPECT_EQ(db::create_invite(conn(), c, pk(4), "code-x", now, now + 60).code, ec::restricted);
  ASSERT_TRUE(db::create_invite(conn(), c, pk(1), "code-a", now, now + 60).ok());
  ASSERT_TRUE(db::create_invite(conn(), c, pk(1), "code-b", now, now + 1).ok());
  EXPECT_EQ(db::claim_invite(conn(), c, pk(2), "code-a", now).outcome, db::claim_outcome::accepted);
  EXPECT_EQ(post(c, 2), write_outcome::stored);
  EXPECT_EQ(db::claim_invite(conn(), c, pk(3), "code-a", now).outcome, db::claim_outcome::bad_code);
  EXPECT_EQ(db::claim_invite(conn(), c, pk(3), "code-b", now + 5).outcome,
            db::claim_outcome::bad_code);
  EXPECT_EQ(db::claim_invite(conn(), c, pk(3), "no-such", now).outcome, db::claim_outcome::bad_code);
  EXPECT_EQ(post(c, 3), write_outcome::refused);
  // Claims are audited, good or bad.
  pqxx::nontransaction tx(conn());
  EXPECT_EQ(tx.exec_params("SELECT count(*) FROM community_audit WHERE community_id = $1 "
                           "AND via = 'nip43' AND method = 'join'", c)[0][0].as<int>(), 4);
}

TEST_F(CommunityAccessTest, TheLastOwnerCannotBeRemoved) {
  auto c = closed_community();
  ASSERT_TRUE(db::add_member(conn(), c, pk(1), member_role::owner, "").has_value());
  auto r = db::remove_member(conn(), c, pk(1), "");
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().code, ec::restricted);
}

// A code is good only while its minter may invite: removing, demoting or
// banning the admin who minted it voids its codes (found by a red team: they
// stayed good for 24 h).
TEST_F(CommunityAccessTest, AnInviteDiesWithItsMintersRight) {
  auto c = closed_community(community_policy::invite);
  ASSERT_TRUE(db::add_member(conn(), c, pk(1), member_role::owner, "").has_value());
  ASSERT_TRUE(db::add_member(conn(), c, pk(5), member_role::admin, "").has_value());
  ASSERT_TRUE(db::add_member(conn(), c, pk(6), member_role::admin, "").has_value());
  auto now = wall_now();
  ASSERT_TRUE(db::create_invite(conn(), c, pk(5), "from-removed", now, now + 60).ok());
  ASSERT_TRUE(db::create_invite(conn(), c, pk(6), "from-demoted", now, now + 60).ok());
  ASSERT_TRUE(db::create_invite(conn(), c, pk(1), "from-owner", now, now + 60).ok());
  ASSERT_TRUE(db::remove_member(conn(), c, pk(5), "").has_value());
  ASSERT_TRUE(db::add_member(conn(), c, pk(6), member_role::member, "").has_value());
  EXPECT_EQ(db::claim_invite(conn(), c, pk(2), "from-removed", now).outcome,
            db::claim_outcome::bad_code);
  EXPECT_EQ(db::claim_invite(conn(), c, pk(2), "from-demoted", now).outcome,
            db::claim_outcome::bad_code);
  EXPECT_EQ(db::claim_invite(conn(), c, pk(2), "from-owner", now).outcome,
            db::claim_outcome::accepted);
}

// Claim 3: the 13534 names every member who may act. A member banned and
// then unbanned is back on the list (red before 0006: the unban published
// nothing).
TEST_F(CommunityAccessTest, AnUnbannedMemberIsBackOnTheList) {
  auto c = closed_community();
  ASSERT_TRUE(db::add_member(conn(), c, pk(1), member_role::owner, "").has_value());
  ASSERT_TRUE(db::add_member(conn(), c, pk(2), member_role::member, "").has_value());
  auto ban = [&](bool on) {
    pqxx::work tx(conn());
    tx.exec_params(on ? "INSERT INTO community_banned_pubkeys (community_id, pubkey) "
                        "VALUES ($1, decode($2, 'hex'))"
                      : "DELETE FROM community_banned_pubkeys WHERE community_id = $1 "
                        "AND pubkey = decode($2, 'hex')",
                   c, pk(2));
    tx.commit();
  };
  ban(true);  // as banpubkey does: banned and removed, then allowed again while banned
  ASSERT_TRUE(db::remove_member(conn(), c, pk(2), "").has_value());
  ASSERT_TRUE(db::add_member(conn(), c, pk(2), member_role::member, "").has_value());
  EXPECT_EQ(db::publish_access_changes(conn(), c, relay(), wall_now()).members,
            std::vector<std::string>{pk(1)});
  ban(false);
  auto pub = db::publish_access_changes(conn(), c, relay(), wall_now() + 1);
  EXPECT_EQ(pub.members, (std::vector<std::string>{std::min(pk(1), pk(2)), std::max(pk(1), pk(2))}));
}

// Issue 34 (invite codes without a limit per minter and per community): open
// codes are bounded per minter and per community; a claimed code frees its
// place, and an expired unclaimed one is deleted by the next mint.
TEST_F(CommunityAccessTest, OpenInviteCodesAreBoundedPerMinterAndPerCommunity) {
  auto c = closed_community(community_policy::invite);
  ASSERT_TRUE(db::add_member(conn(), c, pk(1), member_role::admin, "").has_value());
  ASSERT_TRUE(db::add_member(conn(), c, pk(2), member_role::admin, "").has_value());
  auto now = wall_now();
  db::invite_limits limits{2, 3};
  ASSERT_TRUE(db::create_invite(conn(), c, pk(1), "a1", now, now + 60, limits).ok());
  ASSERT_TRUE(db::create_invite(conn(), c, pk(1), "a2", now, now + 60, limits).ok());
  auto third = db::create_invite(conn(), c, pk(1), "a3", now, now + 60, limits);
  EXPECT_EQ(third.code, ec::rate_limited);
  EXPECT_NE(third.message().find("2 open invite codes"), std::string::npos) << third.message();
  ASSERT_TRUE(db::create_invite(conn(), c, pk(2), "b1", now, now + 1, limits).ok());
  auto full = db::create_invite(conn(), c, pk(2), "b2", now, now + 60, limits);
  EXPECT_EQ(full.code, ec::rate_limited);
  EXPECT_NE(full.message().find("this community holds 3"), std::string::npos) << full.message();
  // A claim frees the minter's place.
  ASSERT_EQ(db::claim_invite(conn(), c, pk(3), "a1", now).outcome, db::claim_outcome::accepted);
  EXPECT_TRUE(db::create_invite(conn(), c, pk(1), "a3", now, now + 60, limits).ok());
  // b1 expired unclaimed: the next mint deletes it and takes its place.
  EXPECT_TRUE(db::create_invite(conn(), c, pk(2), "b2", now + 5, now + 65, limits).ok());
  pqxx::nontransaction tx(conn());
  EXPECT_EQ(tx.exec_params("SELECT count(*) FROM community_invites WHERE community_id = $1 "
                           "AND claimed_by IS NULL", c)[0][0].as<int>(), 3);
  EXPECT_EQ(tx.exec_params("SELECT count(*) FROM community_invites WHERE community_id = $1 "
                           "AND claimed_by IS NOT NULL", c)[0][0].as<int>(), 1)
    << "a claimed code is the record of who let whom in: it is kept";
}

// Two nodes minting at once cannot both take the last place: a mint counts
// under the community's invites lock. Here another mint holds the lock with
// the last code inserted and not yet committed; ours waits for it (seen in
// pg_locks), then counts that code and is refused. Without the lock ours
// would count before the other's commit and both would be stored.
TEST_F(CommunityAccessTest, TwoMintsRacingForTheLastPlaceStoreOnlyOne) {
  auto c = closed_community(community_policy::invite);
  ASSERT_TRUE(db::add_member(conn(), c, pk(1), member_role::admin, "").has_value());
  ASSERT_TRUE(db::add_member(conn(), c, pk(2), member_role::admin, "").has_value());
  auto now = wall_now();
  db::invite_limits limits{0, 1};
  auto other = connect();
  auto ours = connect();
  auto observer = connect();
  int our_pid = ours->backendpid();
  pqxx::work held(*other);
  db::lock_exclusive(held, db::invites_lock_key(c));
  held.exec_params("INSERT INTO community_invites (community_id, code_hash, created_by, "
                   "expires_at) VALUES ($1, sha256('other'::bytea), decode($2, 'hex'), "
                   "to_timestamp($3))",
                   c, pk(2), now + 60);
  auto minted = std::async(std::launch::async, [&] {
    return db::create_invite(*ours, c, pk(1), "ours", now, now + 60, limits);
  });
  bool waited = eventually([&] { return waits_on_advisory_lock(*observer, our_pid); },
                           std::chrono::seconds(3));
  held.commit();
  auto st = minted.get();
  EXPECT_TRUE(waited) << "the mint did not wait for the other's lock";
  EXPECT_EQ(st.code, ec::rate_limited) << st.message();
  pqxx::nontransaction tx(conn());
  EXPECT_EQ(tx.exec_params("SELECT count(*) FROM community_invites WHERE community_id = $1", c)[0][0]
              .as<int>(),
            1);
}

// Must show 4: the capture of a 13534 holds the community's membership lock
// SHARED until its publication commits; a concurrent add waits for it (seen in
// pg_locks), so the list published is exactly the membership at its commit.
TEST_F(CommunityAccessTest, ACaptureHoldsTheLockAConcurrentAddWaitsFor) {
  auto c = closed_community();
  ASSERT_TRUE(db::add_member(conn(), c, pk(1), member_role::owner, "").has_value());
  auto publisher = connect();
  auto adder = connect();
  auto observer = connect();
  int adder_pid = adder->backendpid();
  std::future<result<bool>> added;
  auto pub = db::publish_access_changes(*publisher, c, relay(), wall_now(),
                                        [&](const std::vector<std::string>&) {
                                          added = std::async(std::launch::async, [&] {
                                            return db::add_member(*adder, c, pk(2),
                                                                  member_role::member, "");
                                          });
                                          EXPECT_TRUE(eventually([&] {
                                            return waits_on_advisory_lock(*observer, adder_pid);
                                          })) << "the add did not wait for the capture";
                                        });
  ASSERT_TRUE(added.get().has_value());
  EXPECT_EQ(pub.members, std::vector<std::string>{pk(1)});
  // The add committed after the publication, so it is the next one's.
  auto next = db::publish_access_changes(conn(), c, relay(), wall_now() + 1);
  EXPECT_EQ(next.members, (std::vector<std::string>{std::min(pk(1), pk(2)), std::max(pk(1), pk(2))}));
  ASSERT_FALSE(next.events.empty());
  EXPECT_EQ(next.events.back()->kind, 13534);
}

TEST_F(CommunityAccessTest, RemovalsAndBansAreRevokedOnceAndPolicyClosingIsSeen) {
  auto c = community("open");
  ASSERT_TRUE(db::add_member(conn(), c, pk(1), member_role::owner, "").has_value());
  ASSERT_TRUE(db::add_member(conn(), c, pk(2), member_role::member, "").has_value());
  db::publish_access_changes(conn(), c, relay(), wall_now());
  ASSERT_TRUE(db::remove_member(conn(), c, pk(2), "").has_value());
  {
    pqxx::work tx(conn());
    tx.exec_params("INSERT INTO community_banned_pubkeys (community_id, pubkey) "
                   "VALUES ($1, decode($2, 'hex'))", c, pk(3));
    tx.commit();
  }
  ASSERT_TRUE(db::set_policy(conn(), c, community_policy::closed).has_value());
  auto pub = db::publish_access_changes(conn(), c, relay(), wall_now());
  EXPECT_EQ(pub.revoked, (std::vector<std::string>{std::min(pk(2), pk(3)), std::max(pk(2), pk(3))}));
  EXPECT_TRUE(pub.closed);
  EXPECT_TRUE(db::publish_access_changes(conn(), c, relay(), wall_now()).revoked.empty());
}

}  // namespace
}  // namespace waggle::pgtest
