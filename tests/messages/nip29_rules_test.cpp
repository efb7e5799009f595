// NIP-29's rules (messages/proto/nip29.hpp): who may post and read
// (may_post, may_read), what a membership command changes (plan_membership:
// put, remove, join, leave), who may edit, delete and create (authorize,
// may_create). The parse of the commands: nip29_parse_test.cpp. Helpers:
// nip29_fixture.hpp.

#include <optional>
#include <string>
#include <vector>

#include "tests/messages/nip29_fixture.hpp"

using namespace waggle;
using namespace waggle::proto;
using namespace waggle::proto::nip29;
using namespace waggle::proto::nip29::test_support;

// ---------------------------------------------------------------------------
// may_post / may_read

TEST(Nip29MayPost, MembersOfLiveChannels) {
  for (role r : {role::owner, role::admin, role::member, role::guest, role::bot}) {
    EXPECT_TRUE(may_post(open_channel(), r).ok());
    EXPECT_TRUE(may_post(private_channel(), r).ok());
  }
}

TEST(Nip29MayPost, Refusals) {
  expect_refused(may_post(missing_channel(), role::owner), ec::restricted, "no such channel");
  expect_refused(may_post(deleted_channel(), role::owner), ec::restricted, "deleted");
  expect_refused(may_post(archived_channel(), role::owner), ec::restricted, "channel is archived");
  expect_refused(may_post(open_channel(), std::nullopt), ec::restricted,
                 "not a member of this channel; join it with kind 9021");
  auto s = may_post(private_channel(), std::nullopt);
  expect_refused(s, ec::restricted, "not a member of this private channel");
  EXPECT_EQ(s.reason.find("9021"), std::string::npos);  // no invitation to join a private one
}

TEST(Nip29MayRead, Rules) {
  EXPECT_TRUE(may_read(open_channel(), 0).ok());
  EXPECT_TRUE(may_read(private_channel(), 1).ok());
  EXPECT_TRUE(may_read(private_channel(), 3).ok());
  EXPECT_TRUE(may_read(archived_channel(), 0).ok());
  expect_refused(may_read(private_channel(), 0), ec::restricted, "private");
  expect_refused(may_read(missing_channel(), 5), ec::restricted, "no such channel");
  expect_refused(may_read(deleted_channel(), 5), ec::restricted, "deleted");
}

// ---------------------------------------------------------------------------
// plan_membership: 9000 put user

TEST(Nip29PutUser, OwnerAddsAndPromotes) {
  auto changes = planned(put({{outsider_pk, role::member}, {member_pk, role::admin}}), owner_pk,
                         open_channel(), team());
  EXPECT_EQ(changes, (std::vector<roster_change>{{outsider_pk, role::member},
                                                 {member_pk, role::admin}}));
}

TEST(Nip29PutUser, AdminMayPutMemberGuestBot) {
  auto changes = planned(put({{outsider_pk, role::bot}, {member_pk, role::guest}}), admin_pk,
                         private_channel(), team());
  EXPECT_EQ(changes,
            (std::vector<roster_change>{{outsider_pk, role::bot}, {member_pk, role::guest}}));
}

TEST(Nip29PutUser, AdminMayNotGrantModeratorRoles) {
  expect_refused(plan_membership(put({{member_pk, role::admin}}), admin_pk, open_channel(), team()),
                 ec::restricted, "only an owner can grant");
  expect_refused(
      plan_membership(put({{outsider_pk, role::owner}}), admin_pk, open_channel(), team()),
      ec::restricted, "only an owner can grant");
}

TEST(Nip29PutUser, AdminMayNotChangeOwnerOrAdmin) {
  roster r = team();
  r[pk('f')] = role::admin;
  expect_refused(plan_membership(put({{owner_pk, role::member}}), admin_pk, open_channel(), r),
                 ec::restricted, "only an owner can change");
  expect_refused(plan_membership(put({{pk('f'), role::guest}}), admin_pk, open_channel(), r),
                 ec::restricted, "only an owner can change");
  // Not even their own role.
  expect_refused(plan_membership(put({{admin_pk, role::member}}), admin_pk, open_channel(), r),
                 ec::restricted, "only an owner can change");
}

TEST(Nip29PutUser, NonModeratorsRefused) {
  for (const auto& actor : {member_pk, guest_pk, outsider_pk})
    expect_refused(
        plan_membership(put({{pk('f'), role::member}}), actor, open_channel(), team()),
        ec::restricted, "only an owner or admin");
}

TEST(Nip29PutUser, SameRoleIsNoOp) {
  EXPECT_TRUE(planned(put({{member_pk, role::member}}), owner_pk, open_channel(), team()).empty());
  // Also for an admin "re-putting" an existing admin: nothing changes, nothing to refuse.
  EXPECT_TRUE(planned(put({{admin_pk, role::admin}}), admin_pk, open_channel(), team()).empty());
  auto changes = planned(put({{member_pk, role::member}, {outsider_pk, role::member}}), owner_pk,
                         open_channel(), team());
  EXPECT_EQ(changes, (std::vector<roster_change>{{outsider_pk, role::member}}));
}

TEST(Nip29PutUser, LastOwnerCannotBeDemoted) {
  expect_refused(plan_membership(put({{owner_pk, role::admin}}), owner_pk, open_channel(), team()),
                 ec::restricted, "the last owner cannot be demoted");
}

TEST(Nip29PutUser, HandOverOwnershipInOneCommand) {
  // Promote another owner and demote oneself: the result still has an owner.
  auto changes = planned(put({{owner_pk, role::admin}, {admin_pk, role::owner}}), owner_pk,
                         open_channel(), team());
  EXPECT_EQ(changes,
            (std::vector<roster_change>{{owner_pk, role::admin}, {admin_pk, role::owner}}));
}

TEST(Nip29PutUser, OneOfTwoOwnersMayBeDemoted) {
  roster r = team();
  r[pk('f')] = role::owner;
  auto changes = planned(put({{owner_pk, role::member}}), pk('f'), open_channel(), r);
  EXPECT_EQ(changes, (std::vector<roster_change>{{owner_pk, role::member}}));
  // But not both at once.
  expect_refused(plan_membership(put({{owner_pk, role::member}, {pk('f'), role::admin}}), pk('f'),
                                 open_channel(), r),
                 ec::restricted, "the last owner cannot be demoted");
}

// ---------------------------------------------------------------------------
// plan_membership: 9001 remove user

TEST(Nip29RemoveUser, AdminRemovesMembers) {
  auto changes =
      planned(removal({member_pk, guest_pk}), admin_pk, open_channel(), team());
  EXPECT_EQ(changes, (std::vector<roster_change>{{member_pk, std::nullopt},
                                                 {guest_pk, std::nullopt}}));
}

TEST(Nip29RemoveUser, RemovingNonMemberIsNoOp) {
  EXPECT_TRUE(planned(removal({outsider_pk}), admin_pk, open_channel(), team()).empty());
}

TEST(Nip29RemoveUser, AdminMayNotRemoveModerators) {
  expect_refused(plan_membership(removal({owner_pk}), admin_pk, open_channel(), team()),
                 ec::restricted, "only an owner can remove");
  roster r = team();
  r[pk('f')] = role::admin;
  expect_refused(plan_membership(removal({pk('f')}), admin_pk, open_channel(), r),
                 ec::restricted, "only an owner can remove");
}

TEST(Nip29RemoveUser, OwnerRemovesAdmin) {
  auto changes = planned(removal({admin_pk}), owner_pk, open_channel(), team());
  EXPECT_EQ(changes, (std::vector<roster_change>{{admin_pk, std::nullopt}}));
}

TEST(Nip29RemoveUser, NonModeratorsRefused) {
  expect_refused(plan_membership(removal({guest_pk}), member_pk, open_channel(), team()),
                 ec::restricted, "only an owner or admin");
  expect_refused(plan_membership(removal({guest_pk}), outsider_pk, open_channel(), team()),
                 ec::restricted, "only an owner or admin");
}

TEST(Nip29RemoveUser, LastOwnerCannotBeRemoved) {
  expect_refused(plan_membership(removal({owner_pk}), owner_pk, open_channel(), team()),
                 ec::restricted, "the last owner cannot be removed");
  roster r = team();
  r[pk('f')] = role::owner;
  EXPECT_EQ(planned(removal({owner_pk}), pk('f'), open_channel(), r),
            (std::vector<roster_change>{{owner_pk, std::nullopt}}));
  expect_refused(plan_membership(removal({owner_pk, pk('f')}), pk('f'), open_channel(), r),
                 ec::restricted, "the last owner cannot be removed");
}

// ---------------------------------------------------------------------------
// plan_membership: 9021 join / 9022 leave

TEST(Nip29Join, OpenChannel) {
  EXPECT_EQ(planned(simple(kind_join_request), outsider_pk, open_channel(), team()),
            (std::vector<roster_change>{{outsider_pk, role::member}}));
  // Already a member (any role): nothing to do, role kept.
  EXPECT_TRUE(planned(simple(kind_join_request), guest_pk, open_channel(), team()).empty());
  EXPECT_TRUE(planned(simple(kind_join_request), owner_pk, open_channel(), team()).empty());
}

TEST(Nip29Join, PrivateChannelRefused) {
  expect_refused(plan_membership(simple(kind_join_request), outsider_pk, private_channel(), team()),
                 ec::restricted, "private channel");
  // A member re-sending a join is a no-op rather than a refusal.
  EXPECT_TRUE(planned(simple(kind_join_request), member_pk, private_channel(), team()).empty());
}

TEST(Nip29Join, EmptyRosterWithoutOwnerStillJoinable) {
  // A roster without an owner must not block unrelated changes.
  EXPECT_EQ(planned(simple(kind_join_request), outsider_pk, open_channel(), roster{}),
            (std::vector<roster_change>{{outsider_pk, role::member}}));
}

TEST(Nip29Leave, MemberLeaves) {
  EXPECT_EQ(planned(simple(kind_leave_request), member_pk, open_channel(), team()),
            (std::vector<roster_change>{{member_pk, std::nullopt}}));
  EXPECT_EQ(planned(simple(kind_leave_request), admin_pk, private_channel(), team()),
            (std::vector<roster_change>{{admin_pk, std::nullopt}}));
}

TEST(Nip29Leave, NonMemberRefused) {
  expect_refused(plan_membership(simple(kind_leave_request), outsider_pk, open_channel(), team()),
                 ec::restricted, "not a member");
}

TEST(Nip29Leave, LastOwnerCannotLeave) {
  expect_refused(plan_membership(simple(kind_leave_request), owner_pk, open_channel(), team()),
                 ec::restricted, "the last owner cannot leave");
  roster r = team();
  r[pk('f')] = role::owner;
  EXPECT_EQ(planned(simple(kind_leave_request), owner_pk, open_channel(), r),
            (std::vector<roster_change>{{owner_pk, std::nullopt}}));
}

// ---------------------------------------------------------------------------
// plan_membership: channel state

TEST(Nip29Membership, MissingOrDeletedChannel) {
  for (int32_t k : {kind_put_user, kind_remove_user, kind_join_request, kind_leave_request}) {
    group_command c = k == kind_put_user      ? put({{outsider_pk, role::member}})
                      : k == kind_remove_user ? removal({member_pk})
                                              : simple(k);
    expect_refused(plan_membership(c, owner_pk, missing_channel(), team()), ec::restricted,
                   "no such channel");
    expect_refused(plan_membership(c, owner_pk, deleted_channel(), team()), ec::restricted,
                   "deleted");
  }
}

TEST(Nip29Membership, ArchivedAcceptsLeaveOnly) {
  expect_refused(
      plan_membership(put({{outsider_pk, role::member}}), owner_pk, archived_channel(), team()),
      ec::restricted, "archived");
  expect_refused(plan_membership(removal({member_pk}), owner_pk, archived_channel(), team()),
                 ec::restricted, "archived");
  expect_refused(
      plan_membership(simple(kind_join_request), outsider_pk, archived_channel(), team()),
      ec::restricted, "archived");
  EXPECT_EQ(planned(simple(kind_leave_request), member_pk, archived_channel(), team()),
            (std::vector<roster_change>{{member_pk, std::nullopt}}));
  // The last-owner rule still holds there.
  expect_refused(plan_membership(simple(kind_leave_request), owner_pk, archived_channel(), team()),
                 ec::restricted, "the last owner cannot leave");
}

TEST(Nip29Membership, OtherKindsAreInvalid) {
  expect_refused(plan_membership(simple(kind_edit_metadata), owner_pk, open_channel(), team()),
                 ec::invalid, "not a membership command");
}

// ---------------------------------------------------------------------------
// authorize / may_create

TEST(Nip29Authorize, EditAndDeleteEventsNeedModerator) {
  for (int32_t k : {kind_edit_metadata, kind_delete_event}) {
    EXPECT_TRUE(authorize(simple(k), owner_pk, open_channel(), team()).ok());
    EXPECT_TRUE(authorize(simple(k), admin_pk, private_channel(), team()).ok());
    for (const auto& actor : {member_pk, guest_pk, outsider_pk})
      expect_refused(authorize(simple(k), actor, open_channel(), team()), ec::restricted,
                     "only an owner or admin");
  }
}

TEST(Nip29Authorize, DeleteGroupNeedsOwner) {
  EXPECT_TRUE(authorize(simple(kind_delete_group), owner_pk, open_channel(), team()).ok());
  for (const auto& actor : {admin_pk, member_pk, outsider_pk})
    expect_refused(authorize(simple(kind_delete_group), actor, open_channel(), team()),
                   ec::restricted, "only an owner can delete the channel");
}

TEST(Nip29Authorize, ChannelMustBeLive) {
  for (int32_t k : {kind_edit_metadata, kind_delete_event, kind_delete_group}) {
    expect_refused(authorize(simple(k), owner_pk, missing_channel(), team()), ec::restricted,
                   "no such channel");
    expect_refused(authorize(simple(k), owner_pk, deleted_channel(), team()), ec::restricted,
                   "deleted");
    // Archiving is not deletion: moderators keep their tools.
    EXPECT_TRUE(authorize(simple(k), owner_pk, archived_channel(), team()).ok());
  }
}

TEST(Nip29Authorize, OtherKindsAreInvalid) {
  expect_refused(authorize(simple(kind_put_user), owner_pk, open_channel(), team()), ec::invalid,
                 "not a moderation command");
}

TEST(Nip29MayCreate, OnlyNewIds) {
  EXPECT_TRUE(may_create(missing_channel()).ok());
  expect_refused(may_create(open_channel()), ec::invalid, "group already exists");
  expect_refused(may_create(deleted_channel()), ec::invalid, "group already exists");
  expect_refused(may_create(archived_channel()), ec::invalid, "group already exists");
  expect_refused(may_create(channel_view{false, true, false, true}), ec::invalid,
                 "group already exists");
}
