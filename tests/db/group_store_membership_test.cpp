// NIP-29 channels in the database (db/group_store.hpp), who is in a channel: create
// (9007), put user (9000), remove (9001), join (9021) and leave (9022), run through
// db::apply_group_command with signed events. Fixture: group_store_fixture.hpp.

#include <optional>
#include <string>
#include <vector>

#include "tests/db/group_store_fixture.hpp"

namespace waggle::pgtest {
namespace {

// ---- 1. 9007 create -------------------------------------------------------------------

TEST_F(GroupStoreTest, CreateMakesTheCreatorOwnerAndStoresTheCommandInTheChannel) {
  auto c = community();
  auto create = command_event(owner, nip29::kind_create_group, "general", {{"name", "General"}});
  auto out = run(c, create);
  ASSERT_EQ(out.result.outcome, write_outcome::stored) << out.result.reason;
  EXPECT_EQ(out.change.channel, "general");
  EXPECT_TRUE(out.change.metadata_changed);
  EXPECT_TRUE(out.change.roster_changed);
  EXPECT_FALSE(out.change.deleted);

  auto ch = channel_row(c, "general");
  ASSERT_TRUE(ch);
  EXPECT_EQ(ch->name, "General");
  EXPECT_EQ(ch->visibility, "open");
  EXPECT_EQ(ch->created_by, pk(owner));
  EXPECT_FALSE(ch->ttl_seconds);
  EXPECT_FALSE(ch->deadline_in);
  EXPECT_FALSE(ch->archived);
  EXPECT_FALSE(ch->deleted);

  auto m = member_row(c, "general", pk(owner));
  ASSERT_TRUE(m);
  EXPECT_EQ(m->role, "owner");
  EXPECT_EQ(m->added_by, pk(owner));
  EXPECT_FALSE(m->removed);
  EXPECT_EQ(active_members(c, "general"), 1);

  EXPECT_EQ(event_channel(c, create.id), std::optional<std::string>("general"));
}

TEST_F(GroupStoreTest, CreatePrivateAndEphemeralChannels) {
  auto c = community();
  auto priv = run(c, owner, nip29::kind_create_group, "secret", {{"private"}});
  ASSERT_EQ(priv.result.outcome, write_outcome::stored) << priv.result.reason;
  EXPECT_EQ(channel_row(c, "secret")->visibility, "private");
  EXPECT_FALSE(channel_row(c, "secret")->ttl_seconds);

  auto eph = run(c, owner, nip29::kind_create_group, "standup", {{"ttl", "60"}});
  ASSERT_EQ(eph.result.outcome, write_outcome::stored) << eph.result.reason;
  auto ch = channel_row(c, "standup");
  ASSERT_TRUE(ch);
  EXPECT_EQ(ch->visibility, "open");
  EXPECT_EQ(ch->ttl_seconds, std::optional<int32_t>(60));
  ASSERT_TRUE(ch->deadline_in);
  EXPECT_GT(*ch->deadline_in, 50.0);
  EXPECT_LE(*ch->deadline_in, 60.5);
}

TEST_F(GroupStoreTest, CreatingAnExistingOrDeletedGroupIsRejected) {
  auto c = community();
  ASSERT_EQ(run(c, owner, nip29::kind_create_group, "taken").result.outcome, write_outcome::stored);
  auto again = command_event(other, nip29::kind_create_group, "taken", {{"name", "mine now"}});
  auto out = run(c, again);
  EXPECT_EQ(out.result.outcome, write_outcome::rejected);
  EXPECT_TRUE(contains(out.result.reason, "group already exists")) << out.result.reason;
  EXPECT_FALSE(out.change.any());
  EXPECT_FALSE(exists(c, again.id));
  EXPECT_EQ(channel_row(c, "taken")->name, "");
  EXPECT_EQ(channel_row(c, "taken")->created_by, pk(owner));
  EXPECT_EQ(role_of(c, "taken", pk(other)), "");
  EXPECT_EQ(active_members(c, "taken"), 1);

  // Ids are never reused, not even after the group was deleted.
  ASSERT_EQ(run(c, owner, nip29::kind_create_group, "gone").result.outcome, write_outcome::stored);
  ASSERT_EQ(run(c, owner, nip29::kind_delete_group, "gone").result.outcome, write_outcome::stored);
  auto revive = run(c, other, nip29::kind_create_group, "gone");
  EXPECT_EQ(revive.result.outcome, write_outcome::rejected);
  EXPECT_TRUE(contains(revive.result.reason, "group already exists")) << revive.result.reason;
  EXPECT_TRUE(channel_row(c, "gone")->deleted);
  EXPECT_EQ(role_of(c, "gone", pk(other)), "");

  // The same id in another community is another channel.
  auto c2 = community("other");
  EXPECT_EQ(run(c2, other, nip29::kind_create_group, "taken").result.outcome, write_outcome::stored);
  EXPECT_EQ(role_of(c2, "taken", pk(other)), "owner");
}

TEST_F(GroupStoreTest, CreateWithABadGroupIdIsRejected) {
  auto c = community();
  for (const std::string& bad : std::vector<std::string>{"Upper", "has space", "dot.ted", std::string(65, 'a'), ""}) {
    auto ev = command_event(owner, nip29::kind_create_group, bad);
    auto out = run(c, ev);
    EXPECT_EQ(out.result.outcome, write_outcome::rejected) << "'" << bad << "'";
    EXPECT_FALSE(exists(c, ev.id)) << bad;
  }
  auto no_h = make_event(owner, nip29::kind_create_group, next_ts(), {{"name", "x"}});
  auto out = run(c, no_h);
  EXPECT_EQ(out.result.outcome, write_outcome::rejected);
  EXPECT_TRUE(contains(out.result.reason, "missing h tag")) << out.result.reason;
  {
    pqxx::nontransaction tx(conn());
    EXPECT_EQ(tx.exec_params("SELECT count(*) FROM channels WHERE community_id = $1", c)[0][0].as<int>(), 0);
  }
  EXPECT_EQ(all_rows(c), 0);
}

// ---- 2. 9000 put user -------------------------------------------------------------------

TEST_F(GroupStoreTest, PutUserByOwnerOrAdminOnly) {
  auto c = community();
  ASSERT_EQ(run(c, owner, nip29::kind_create_group, "room").result.outcome, write_outcome::stored);

  auto by_owner = run(c, owner, nip29::kind_put_user, "room", {{"p", pk(admin), "admin"}});
  ASSERT_EQ(by_owner.result.outcome, write_outcome::stored) << by_owner.result.reason;
  EXPECT_TRUE(by_owner.change.roster_changed);
  EXPECT_FALSE(by_owner.change.metadata_changed);
  EXPECT_EQ(role_of(c, "room", pk(admin)), "admin");
  EXPECT_EQ(member_row(c, "room", pk(admin))->added_by, pk(owner));

  // No role (or an empty one) means member.
  auto by_admin = run(c, admin, nip29::kind_put_user, "room", {{"p", pk(member)}});
  ASSERT_EQ(by_admin.result.outcome, write_outcome::stored) << by_admin.result.reason;
  EXPECT_EQ(role_of(c, "room", pk(member)), "member");
  EXPECT_EQ(member_row(c, "room", pk(member))->added_by, pk(admin));

  // A member cannot add anyone.
  auto by_member = command_event(member, nip29::kind_put_user, "room", {{"p", pk(other), "member"}});
  auto refused = run(c, by_member);
  EXPECT_EQ(refused.result.outcome, write_outcome::refused);
  EXPECT_FALSE(refused.change.any());
  EXPECT_EQ(role_of(c, "room", pk(other)), "");
  EXPECT_FALSE(exists(c, by_member.id)) << "a refused command is not stored";

  // Neither can an outsider.
  EXPECT_EQ(run(c, outsider, nip29::kind_put_user, "room", {{"p", pk(outsider), "owner"}}).result.outcome,
            write_outcome::refused);
  EXPECT_EQ(role_of(c, "room", pk(outsider)), "");

  // An admin cannot make an owner or an admin, nor change an owner's role.
  for (const char* role : {"admin", "owner"}) {
    auto out = run(c, admin, nip29::kind_put_user, "room", {{"p", pk(other), role}});
    EXPECT_EQ(out.result.outcome, write_outcome::refused) << role;
    EXPECT_TRUE(contains(out.result.reason, "only an owner")) << out.result.reason;
    EXPECT_EQ(role_of(c, "room", pk(other)), "") << role;
  }
  auto promote = run(c, admin, nip29::kind_put_user, "room", {{"p", pk(member), "admin"}});
  EXPECT_EQ(promote.result.outcome, write_outcome::refused);
  EXPECT_EQ(role_of(c, "room", pk(member)), "member");
  auto demote = run(c, admin, nip29::kind_put_user, "room", {{"p", pk(owner), "member"}});
  EXPECT_EQ(demote.result.outcome, write_outcome::refused);
  EXPECT_EQ(role_of(c, "room", pk(owner)), "owner");

  // An unknown role is invalid.
  EXPECT_EQ(run(c, owner, nip29::kind_put_user, "room", {{"p", pk(other), "king"}}).result.outcome,
            write_outcome::rejected);
  // A channel that does not exist.
  EXPECT_EQ(run(c, owner, nip29::kind_put_user, "nowhere", {{"p", pk(other)}}).result.outcome,
            write_outcome::refused);
}

TEST_F(GroupStoreTest, RoleChangeKeepsAddedAtAndReAddClearsTheRemoval) {
  auto c = community();
  make_channel(c, "room");
  const auto first = *member_row(c, "room", pk(member));
  ASSERT_EQ(first.added_by, pk(owner));

  // A role change keeps added_at and added_by.
  auto to_guest = run(c, admin, nip29::kind_put_user, "room", {{"p", pk(member), "guest"}});
  ASSERT_EQ(to_guest.result.outcome, write_outcome::stored) << to_guest.result.reason;
  EXPECT_TRUE(to_guest.change.roster_changed);
  auto changed = *member_row(c, "room", pk(member));
  EXPECT_EQ(changed.role, "guest");
  EXPECT_EQ(changed.added_at, first.added_at);
  EXPECT_EQ(changed.added_by, pk(owner));

  // Putting the same role again changes nothing.
  auto same = run(c, admin, nip29::kind_put_user, "room", {{"p", pk(member), "guest"}});
  EXPECT_EQ(same.result.outcome, write_outcome::stored);
  EXPECT_FALSE(same.change.roster_changed);

  auto removed = run(c, owner, nip29::kind_remove_user, "room", {{"p", pk(member)}});
  ASSERT_EQ(removed.result.outcome, write_outcome::stored);
  ASSERT_TRUE(member_row(c, "room", pk(member))->removed);

  // Re-adding clears removed_at/removed_by and starts a new membership.
  auto readd = run(c, admin, nip29::kind_put_user, "room", {{"p", pk(member), "member"}});
  ASSERT_EQ(readd.result.outcome, write_outcome::stored) << readd.result.reason;
  EXPECT_TRUE(readd.change.roster_changed);
  EXPECT_TRUE(readd.change.removed.empty());
  auto back = *member_row(c, "room", pk(member));
  EXPECT_FALSE(back.removed);
  EXPECT_EQ(back.removed_by, "");
  EXPECT_EQ(back.role, "member");
  EXPECT_EQ(back.added_by, pk(admin));
  EXPECT_GT(back.added_at, first.added_at);
  pqxx::nontransaction tx(conn());
  EXPECT_TRUE(tx.exec_params("SELECT removed_at IS NULL AND removed_by IS NULL FROM channel_members "
                             "WHERE community_id = $1 AND channel_id = 'room' AND pubkey = decode($2, 'hex')",
                             c, pk(member))[0][0]
                .as<bool>());
}

// ---- 3. 9001 remove ---------------------------------------------------------------------

TEST_F(GroupStoreTest, RemoveIsSoftAndTheLastOwnerStays) {
  auto c = community();
  make_channel(c, "room");

  auto out = run(c, admin, nip29::kind_remove_user, "room", {{"p", pk(member)}});
  ASSERT_EQ(out.result.outcome, write_outcome::stored) << out.result.reason;
  EXPECT_TRUE(out.change.roster_changed);
  EXPECT_EQ(out.change.removed, std::vector<std::string>{pk(member)});
  auto m = member_row(c, "room", pk(member));
  ASSERT_TRUE(m) << "removal is soft: the row stays";
  EXPECT_TRUE(m->removed);
  EXPECT_EQ(m->removed_by, pk(admin));
  EXPECT_EQ(m->role, "member");

  // Removing someone who is not a member is a no-op (stored, nothing changes).
  auto noop = run(c, admin, nip29::kind_remove_user, "room", {{"p", pk(other)}});
  EXPECT_EQ(noop.result.outcome, write_outcome::stored);
  EXPECT_FALSE(noop.change.roster_changed);
  EXPECT_FALSE(member_row(c, "room", pk(other)));

  // An admin cannot remove an owner; a member cannot remove anyone.
  EXPECT_EQ(run(c, admin, nip29::kind_remove_user, "room", {{"p", pk(owner)}}).result.outcome,
            write_outcome::refused);
  ASSERT_EQ(run(c, owner, nip29::kind_put_user, "room", {{"p", pk(other)}}).result.outcome,
            write_outcome::stored);
  EXPECT_EQ(run(c, other, nip29::kind_remove_user, "room", {{"p", pk(admin)}}).result.outcome,
            write_outcome::refused);
  EXPECT_EQ(role_of(c, "room", pk(admin)), "admin");

  // The last owner can neither be removed nor demoted.
  auto self_remove = run(c, owner, nip29::kind_remove_user, "room", {{"p", pk(owner)}});
  EXPECT_EQ(self_remove.result.outcome, write_outcome::refused);
  EXPECT_TRUE(contains(self_remove.result.reason, "last owner cannot be removed")) << self_remove.result.reason;
  auto self_demote = run(c, owner, nip29::kind_put_user, "room", {{"p", pk(owner), "admin"}});
  EXPECT_EQ(self_demote.result.outcome, write_outcome::refused);
  EXPECT_TRUE(contains(self_demote.result.reason, "last owner cannot be demoted")) << self_demote.result.reason;
  EXPECT_EQ(role_of(c, "room", pk(owner)), "owner");

  // With a second owner, the first may go.
  ASSERT_EQ(run(c, owner, nip29::kind_put_user, "room", {{"p", pk(admin), "owner"}}).result.outcome,
            write_outcome::stored);
  EXPECT_EQ(run(c, admin, nip29::kind_remove_user, "room", {{"p", pk(owner)}}).result.outcome,
            write_outcome::stored);
  EXPECT_EQ(role_of(c, "room", pk(owner)), "");
  EXPECT_EQ(member_row(c, "room", pk(owner))->removed_by, pk(admin));
}

// ---- 4. 9021 join / 9022 leave ----------------------------------------------------------

TEST_F(GroupStoreTest, JoinOpenChannelsOnlyAndLeave) {
  auto c = community();
  make_channel(c, "open-room");
  make_channel(c, "closed-room", {{"private"}});

  auto join = run(c, outsider, nip29::kind_join_request, "open-room");
  ASSERT_EQ(join.result.outcome, write_outcome::stored) << join.result.reason;
  EXPECT_TRUE(join.change.roster_changed);
  EXPECT_EQ(role_of(c, "open-room", pk(outsider)), "member");
  EXPECT_EQ(member_row(c, "open-room", pk(outsider))->added_by, pk(outsider));

  // Joining again changes nothing.
  auto again = run(c, outsider, nip29::kind_join_request, "open-room");
  EXPECT_EQ(again.result.outcome, write_outcome::stored);
  EXPECT_FALSE(again.change.roster_changed);

  auto closed = command_event(outsider, nip29::kind_join_request, "closed-room");
  auto refused = run(c, closed);
  EXPECT_EQ(refused.result.outcome, write_outcome::refused);
  EXPECT_TRUE(contains(refused.result.reason, "private")) << refused.result.reason;
  EXPECT_EQ(role_of(c, "closed-room", pk(outsider)), "");
  EXPECT_FALSE(exists(c, closed.id));

  EXPECT_EQ(run(c, outsider, nip29::kind_join_request, "no-such-room").result.outcome,
            write_outcome::refused);

  // Leave.
  auto leave = run(c, outsider, nip29::kind_leave_request, "open-room");
  ASSERT_EQ(leave.result.outcome, write_outcome::stored) << leave.result.reason;
  EXPECT_EQ(leave.change.removed, std::vector<std::string>{pk(outsider)});
  auto m = member_row(c, "open-room", pk(outsider));
  ASSERT_TRUE(m);
  EXPECT_TRUE(m->removed);
  EXPECT_EQ(m->removed_by, pk(outsider));
  // Leaving when not a member is refused.
  EXPECT_EQ(run(c, outsider, nip29::kind_leave_request, "open-room").result.outcome,
            write_outcome::refused);
  // A member of a private channel may leave it.
  EXPECT_EQ(run(c, member, nip29::kind_leave_request, "closed-room").result.outcome,
            write_outcome::stored);
  EXPECT_EQ(role_of(c, "closed-room", pk(member)), "");

  // The last owner cannot leave.
  auto last = run(c, owner, nip29::kind_leave_request, "open-room");
  EXPECT_EQ(last.result.outcome, write_outcome::refused);
  EXPECT_TRUE(contains(last.result.reason, "last owner cannot leave")) << last.result.reason;
  EXPECT_EQ(role_of(c, "open-room", pk(owner)), "owner");
}

}  // namespace
}  // namespace waggle::pgtest
