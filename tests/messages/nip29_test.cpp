#include "messages/proto/nip29.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <ostream>
#include <string>
#include <vector>

using namespace waggle;
using namespace waggle::proto;
using namespace waggle::proto::nip29;

namespace {

// BIP-340 vector 1 secret key; commands are signed like real ones even though
// the parse does not verify signatures.
constexpr std::string_view sk1 = "b7e151628aed2a6abf7158809cf4f3c762e7160f38b4da56a784d9045190cfef";

// Distinct, sortable pubkeys: "aaaa..." < "bbbb..." < ...
std::string pk(char c) { return std::string(64, c); }
const std::string owner_pk = pk('a');
const std::string admin_pk = pk('b');
const std::string member_pk = pk('c');
const std::string guest_pk = pk('d');
const std::string outsider_pk = pk('e');

event command(int32_t kind, std::vector<tag> tags) {
  event ev;
  ev.created_at = 1700000000;
  ev.kind = kind;
  ev.tags = std::move(tags);
  sign(ev, sk1);
  return ev;
}

event with_tags(int32_t kind, std::vector<tag> tags) {
  event ev;
  ev.kind = kind;
  ev.tags = std::move(tags);
  return ev;
}

group_command parsed(int32_t kind, std::vector<tag> tags) {
  auto r = parse_group_command(command(kind, std::move(tags)));
  EXPECT_TRUE(r.has_value()) << r.error().reason;
  return r.has_value() ? *r : group_command{};
}

void expect_parse_error(int32_t kind, std::vector<tag> tags, std::string_view reason_part) {
  auto r = parse_group_command(command(kind, std::move(tags)));
  ASSERT_FALSE(r.has_value()) << "accepted kind " << kind;
  EXPECT_EQ(r.error().code, ec::invalid);
  EXPECT_NE(r.error().reason.find(reason_part), std::string::npos)
      << "reason '" << r.error().reason << "' lacks '" << reason_part << "'";
}

void expect_refused(const status& s, ec code, std::string_view reason_part) {
  EXPECT_EQ(s.code, code);
  EXPECT_NE(s.reason.find(reason_part), std::string::npos)
      << "reason '" << s.reason << "' lacks '" << reason_part << "'";
}

template <class T>
void expect_refused(const result<T>& r, ec code, std::string_view reason_part) {
  ASSERT_FALSE(r.has_value());
  expect_refused(r.error(), code, reason_part);
}

channel_view open_channel() { return channel_view{true, false, false, true}; }
channel_view private_channel() { return channel_view{true, false, false, false}; }
channel_view archived_channel() { return channel_view{true, false, true, true}; }
channel_view deleted_channel() { return channel_view{true, true, false, true}; }
channel_view missing_channel() { return channel_view{false, false, false, true}; }

roster team() {
  return roster{{owner_pk, role::owner},
                {admin_pk, role::admin},
                {member_pk, role::member},
                {guest_pk, role::guest}};
}

group_command put(std::vector<user_role> users) {
  group_command c;
  c.kind = kind_put_user;
  c.group = "general";
  c.users = std::move(users);
  return c;
}

group_command removal(std::vector<std::string> pubkeys) {
  group_command c;
  c.kind = kind_remove_user;
  c.group = "general";
  for (auto& p : pubkeys)
    c.users.push_back({std::move(p), role::member});
  return c;
}

group_command simple(int32_t kind) {
  group_command c;
  c.kind = kind;
  c.group = "general";
  return c;
}

std::vector<roster_change> planned(const group_command& cmd, const std::string& actor,
                                   const channel_view& ch, const roster& members) {
  auto r = plan_membership(cmd, actor, ch, members);
  EXPECT_TRUE(r.has_value()) << r.error().reason;
  return r.has_value() ? *r : std::vector<roster_change>{};
}

}  // namespace

// In the type's namespace so std::vector's operator== and gtest find them.
namespace waggle::proto::nip29 {
static bool operator==(const roster_change& a, const roster_change& b) {
  return a.pubkey == b.pubkey && a.new_role == b.new_role;
}
static void PrintTo(const roster_change& c, std::ostream* os) {
  *os << c.pubkey.substr(0, 8) << "->" << (c.new_role ? name_of(*c.new_role) : "removed");
}
}  // namespace waggle::proto::nip29

// ---------------------------------------------------------------------------
// Roles and ids

TEST(Nip29Role, ParseAndNameRoundTrip) {
  for (role r : {role::owner, role::admin, role::member, role::guest, role::bot})
    EXPECT_EQ(parse_role(name_of(r)), r);
  EXPECT_FALSE(parse_role("Owner"));
  EXPECT_FALSE(parse_role("moderator"));
  EXPECT_FALSE(parse_role(""));
  EXPECT_TRUE(moderates(role::owner));
  EXPECT_TRUE(moderates(role::admin));
  EXPECT_FALSE(moderates(role::member));
  EXPECT_FALSE(moderates(role::guest));
  EXPECT_FALSE(moderates(role::bot));
}

TEST(Nip29GroupId, Shape) {
  EXPECT_TRUE(valid_group_id("a"));
  EXPECT_TRUE(valid_group_id("general_chat-2"));
  EXPECT_TRUE(valid_group_id(std::string(64, 'x')));
  EXPECT_FALSE(valid_group_id(""));
  EXPECT_FALSE(valid_group_id(std::string(65, 'x')));
  EXPECT_FALSE(valid_group_id("General"));
  EXPECT_FALSE(valid_group_id("a b"));
  EXPECT_FALSE(valid_group_id("a.b"));
  EXPECT_FALSE(valid_group_id("caf\xc3\xa9"));
}

// ---------------------------------------------------------------------------
// channel_of

TEST(Nip29ChannelOf, NoHTagIsNoChannel) {
  auto r = channel_of(with_tags(1, {{"p", owner_pk}}));
  ASSERT_TRUE(r.has_value());
  EXPECT_FALSE(*r);
}

TEST(Nip29ChannelOf, SingleHTag) {
  auto r = channel_of(with_tags(9, {{"e", pk('1')}, {"h", "general", "wss://relay"}}));
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(*r, std::optional<std::string>("general"));
}

TEST(Nip29ChannelOf, SeveralHTagsRefused) {
  expect_refused(channel_of(with_tags(9, {{"h", "a"}, {"h", "b"}})), ec::invalid,
                 "an event belongs to at most one channel (several h tags)");
  // Even when both name the same channel.
  expect_refused(channel_of(with_tags(9, {{"h", "a"}, {"h", "a"}})), ec::invalid, "several h");
}

TEST(Nip29ChannelOf, HTagWithoutValueOrBadIdRefused) {
  expect_refused(channel_of(with_tags(9, {{"h"}})), ec::invalid, "without a value");
  expect_refused(channel_of(with_tags(9, {{"h", ""}})), ec::invalid, "h tag");
  expect_refused(channel_of(with_tags(9, {{"h", "Not_Valid"}})), ec::invalid, "h tag");
  expect_refused(channel_of(with_tags(9, {{"h", std::string(65, 'a')}})), ec::invalid, "h tag");
}

TEST(Nip29ChannelOf, StateKindsBelongToNoChannel) {
  for (int32_t k : {39000, 39001, 39002, 39003}) {
    // Even with a (bad, or several) h tag: they are addressed by d.
    auto r = channel_of(with_tags(k, {{"d", "general"}, {"h", "a"}, {"h", "BAD"}}));
    ASSERT_TRUE(r.has_value()) << k;
    EXPECT_FALSE(*r) << k;
  }
  // Neighbouring kinds are ordinary.
  auto r = channel_of(with_tags(39004, {{"h", "general"}}));
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(*r, std::optional<std::string>("general"));
}

TEST(Nip29ChannelOf, EmptyTagIgnored) {
  auto r = channel_of(with_tags(9, {{}, {"h", "x"}}));
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(*r, std::optional<std::string>("x"));
}

// ---------------------------------------------------------------------------
// parse_group_command: common

TEST(Nip29Parse, NotACommandKind) {
  expect_parse_error(1, {{"h", "general"}}, "not a group command");
  expect_parse_error(39000, {{"h", "general"}}, "not a group command");
}

TEST(Nip29Parse, HTagRequired) {
  for (int32_t k : {9000, 9001, 9002, 9005, 9007, 9008, 9021, 9022})
    expect_parse_error(k, {{"p", member_pk}, {"e", pk('1')}}, "missing h tag");
  expect_parse_error(kind_join_request, {{"h", "a"}, {"h", "b"}}, "several h tags");
  expect_parse_error(kind_join_request, {{"h"}}, "without a value");
  expect_parse_error(kind_create_group, {{"h", "New Group"}}, "h tag");
}

TEST(Nip29Parse, GroupOnlyCommands) {
  for (int32_t k : {kind_delete_group, kind_join_request, kind_leave_request}) {
    auto c = parsed(k, {{"h", "general"}, {"code", "ignored"}});
    EXPECT_EQ(c.kind, k);
    EXPECT_EQ(c.group, "general");
    EXPECT_TRUE(c.users.empty());
    EXPECT_TRUE(c.event_ids.empty());
    EXPECT_FALSE(c.name);
    EXPECT_FALSE(c.is_private);
    EXPECT_FALSE(c.ttl_seconds);
  }
}

// ---------------------------------------------------------------------------
// 9000 / 9001

TEST(Nip29Parse, PutUserRolesAndDefault) {
  auto c = parsed(kind_put_user, {{"h", "general"},
                                  {"p", member_pk},
                                  {"p", admin_pk, "admin"},
                                  {"p", guest_pk, "guest", "bot"},  // first role wins
                                  {"p", outsider_pk, ""},           // empty = no role
                                  {"previous", "abcd1234"}});
  ASSERT_EQ(c.users.size(), 4u);
  EXPECT_EQ(c.users[0].pubkey, member_pk);
  EXPECT_EQ(c.users[0].r, role::member);
  EXPECT_EQ(c.users[1].pubkey, admin_pk);
  EXPECT_EQ(c.users[1].r, role::admin);
  EXPECT_EQ(c.users[2].r, role::guest);
  EXPECT_EQ(c.users[3].r, role::member);
}

TEST(Nip29Parse, PutUserErrors) {
  expect_parse_error(kind_put_user, {{"h", "general"}}, "missing p tag");
  expect_parse_error(kind_put_user, {{"h", "general"}, {"p"}}, "64-character lowercase hex");
  expect_parse_error(kind_put_user, {{"h", "general"}, {"p", "abc"}}, "64-character");
  std::string upper(64, 'A');
  expect_parse_error(kind_put_user, {{"h", "general"}, {"p", upper}}, "64-character");
  expect_parse_error(kind_put_user, {{"h", "general"}, {"p", member_pk, "moderator"}},
                     "unknown role: moderator");
  expect_parse_error(kind_put_user, {{"h", "general"}, {"p", member_pk, "Admin"}}, "unknown role");
  expect_parse_error(kind_put_user,
                     {{"h", "general"}, {"p", member_pk, "admin"}, {"p", member_pk, "member"}},
                     "several p tags");
}

TEST(Nip29Parse, RemoveUserIgnoresRoleAndDuplicates) {
  auto c = parsed(kind_remove_user, {{"h", "general"},
                                     {"p", member_pk, "nonsense"},
                                     {"p", guest_pk},
                                     {"p", member_pk}});
  ASSERT_EQ(c.users.size(), 2u);
  EXPECT_EQ(c.users[0].pubkey, member_pk);
  EXPECT_EQ(c.users[1].pubkey, guest_pk);
  expect_parse_error(kind_remove_user, {{"h", "general"}}, "missing p tag");
  expect_parse_error(kind_remove_user, {{"h", "general"}, {"p", "xyz"}}, "64-character");
}

// ---------------------------------------------------------------------------
// 9005

TEST(Nip29Parse, DeleteEvent) {
  auto c = parsed(kind_delete_event,
                  {{"h", "general"}, {"e", pk('1')}, {"e", pk('2')}, {"e", pk('1')}});
  EXPECT_EQ(c.event_ids, (std::vector<std::string>{pk('1'), pk('2')}));
  expect_parse_error(kind_delete_event, {{"h", "general"}}, "missing e tag");
  expect_parse_error(kind_delete_event, {{"h", "general"}, {"e", "1234"}}, "64-character");
  expect_parse_error(kind_delete_event, {{"h", "general"}, {"e", std::string(64, 'F')}},
                     "64-character");
  expect_parse_error(kind_delete_event, {{"h", "general"}, {"e"}}, "64-character");
}

// ---------------------------------------------------------------------------
// 9002 / 9007 metadata

TEST(Nip29Parse, EditMetadataAllFields) {
  auto c = parsed(kind_edit_metadata, {{"h", "general"},
                                       {"name", "General"},
                                       {"about", "Talk"},
                                       {"picture", "https://x/p.png"},
                                       {"private"},
                                       {"ttl", "3600"}});
  EXPECT_EQ(c.name, std::optional<std::string>("General"));
  EXPECT_EQ(c.about, std::optional<std::string>("Talk"));
  EXPECT_EQ(c.picture, std::optional<std::string>("https://x/p.png"));
  EXPECT_EQ(c.is_private, std::optional<bool>(true));
  ASSERT_TRUE(c.ttl_seconds);
  EXPECT_EQ(*c.ttl_seconds, std::optional<int32_t>(3600));
}

TEST(Nip29Parse, EditMetadataAbsentMeansUnchanged) {
  auto c = parsed(kind_edit_metadata, {{"h", "general"}});
  EXPECT_FALSE(c.name);
  EXPECT_FALSE(c.about);
  EXPECT_FALSE(c.picture);
  EXPECT_FALSE(c.is_private);
  EXPECT_FALSE(c.ttl_seconds);
  // An empty name is a value (clears it), not absence.
  auto d = parsed(kind_edit_metadata, {{"h", "general"}, {"about", ""}});
  EXPECT_EQ(d.about, std::optional<std::string>(""));
}

TEST(Nip29Parse, VisibilityTags) {
  EXPECT_EQ(parsed(kind_edit_metadata, {{"h", "g"}, {"public"}}).is_private, std::optional(false));
  EXPECT_EQ(parsed(kind_edit_metadata, {{"h", "g"}, {"open"}}).is_private, std::optional(false));
  EXPECT_EQ(parsed(kind_edit_metadata, {{"h", "g"}, {"closed"}}).is_private, std::optional(true));
  EXPECT_EQ(parsed(kind_edit_metadata, {{"h", "g"}, {"private"}, {"closed"}}).is_private,
            std::optional(true));
  EXPECT_EQ(parsed(kind_edit_metadata, {{"h", "g"}, {"public"}, {"open"}}).is_private,
            std::optional(false));
  expect_parse_error(kind_edit_metadata, {{"h", "g"}, {"private"}, {"public"}}, "conflicting");
  expect_parse_error(kind_edit_metadata, {{"h", "g"}, {"closed"}, {"open"}}, "conflicting");
}

TEST(Nip29Parse, TtlZeroIsPermanent) {
  auto c = parsed(kind_edit_metadata, {{"h", "g"}, {"ttl", "0"}});
  ASSERT_TRUE(c.ttl_seconds);   // present: change it
  EXPECT_FALSE(*c.ttl_seconds);  // to permanent
}

TEST(Nip29Parse, TtlBounds) {
  constexpr int32_t max = 366 * 86400;
  auto one = parsed(kind_edit_metadata, {{"h", "g"}, {"ttl", "1"}});
  EXPECT_EQ(*one.ttl_seconds, std::optional<int32_t>(1));
  auto top = parsed(kind_edit_metadata, {{"h", "g"}, {"ttl", std::to_string(max)}});
  EXPECT_EQ(*top.ttl_seconds, std::optional<int32_t>(max));
  auto zeros = parsed(kind_edit_metadata, {{"h", "g"}, {"ttl", "00060"}});
  EXPECT_EQ(*zeros.ttl_seconds, std::optional<int32_t>(60));
  expect_parse_error(kind_edit_metadata, {{"h", "g"}, {"ttl", std::to_string(max + 1)}},
                     "366 days");
  expect_parse_error(kind_edit_metadata, {{"h", "g"}, {"ttl", "99999999999999999999999"}},
                     "366 days");
}

TEST(Nip29Parse, TtlMalformed) {
  for (const char* bad : {"-1", "+5", "", "1.5", "1e3", " 60", "60s", "abc"})
    expect_parse_error(kind_edit_metadata, {{"h", "g"}, {"ttl", bad}}, "ttl");
  expect_parse_error(kind_edit_metadata, {{"h", "g"}, {"ttl"}}, "ttl tag without a value");
  expect_parse_error(kind_edit_metadata, {{"h", "g"}, {"ttl", "1"}, {"ttl", "2"}}, "duplicate ttl");
}

// Issue 13, finding 8: `evil\u0000name` was stored and signed as `evil` (the
// NUL cut where the text met the database). Every field the relay copies into
// its signed state now refuses control characters. Red check: on the base
// code each of these parsed.
TEST(Nip29Parse, ControlCharactersInRelaySignedTextAreRefused) {
  for (const char* field : {"name", "about", "picture"}) {
    for (char c : {'\0', '\x01', '\n', '\r', '\t', '\x1f', '\x7f'}) {
      std::string value = std::string("evil") + c + "name";
      expect_parse_error(kind_edit_metadata, {{"h", "g"}, {field, value}},
                         std::string(field) + " must not contain control characters");
      expect_parse_error(kind_create_group, {{"h", "g"}, {field, value}},
                         "control characters");
    }
  }
  // Printable ASCII and UTF-8 beyond it are text, not control characters.
  EXPECT_TRUE(parsed(kind_edit_metadata, {{"h", "g"}, {"name", "caf\xc3\xa9 ~ \xe2\x9c\x93"}}).name);
  EXPECT_TRUE(check_relay_text("name", " !~").ok());
  EXPECT_EQ(check_relay_text("about", std::string("a\0b", 3)).code, ec::invalid);
  EXPECT_EQ(check_relay_text("about", "\x7f").code, ec::invalid);
}

TEST(Nip29Parse, TextFieldLimits) {
  EXPECT_TRUE(parsed(kind_edit_metadata, {{"h", "g"}, {"name", std::string(128, 'n')}}).name);
  EXPECT_TRUE(parsed(kind_edit_metadata, {{"h", "g"}, {"about", std::string(2048, 'a')}}).about);
  EXPECT_TRUE(
      parsed(kind_edit_metadata, {{"h", "g"}, {"picture", std::string(1024, 'p')}}).picture);
  expect_parse_error(kind_edit_metadata, {{"h", "g"}, {"name", std::string(129, 'n')}},
                     "name too long");
  expect_parse_error(kind_edit_metadata, {{"h", "g"}, {"about", std::string(2049, 'a')}},
                     "about too long");
  expect_parse_error(kind_edit_metadata, {{"h", "g"}, {"picture", std::string(1025, 'p')}},
                     "picture too long");
  expect_parse_error(kind_edit_metadata, {{"h", "g"}, {"name"}}, "name tag without a value");
  expect_parse_error(kind_edit_metadata, {{"h", "g"}, {"name", "a"}, {"name", "b"}},
                     "duplicate name");
}

TEST(Nip29Parse, CreateGroup) {
  auto c = parsed(kind_create_group, {{"h", "new-room"}, {"name", "New room"}, {"closed"}});
  EXPECT_EQ(c.kind, kind_create_group);
  EXPECT_EQ(c.group, "new-room");
  EXPECT_EQ(c.name, std::optional<std::string>("New room"));
  EXPECT_EQ(c.is_private, std::optional(true));
  expect_parse_error(kind_create_group, {{"h", "new room"}}, "h tag");
  expect_parse_error(kind_create_group, {{"h", "x"}, {"ttl", "-3"}}, "ttl");
}

TEST(Nip29Parse, MetadataTagsIgnoredOnOtherKinds) {
  auto c = parsed(kind_join_request, {{"h", "g"}, {"name", std::string(500, 'n')}, {"ttl", "-1"}});
  EXPECT_FALSE(c.name);
  EXPECT_FALSE(c.ttl_seconds);
}

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

// ---------------------------------------------------------------------------
// State event tags

TEST(Nip29Tags, MetadataMinimalOpen) {
  group_metadata md;
  md.id = "general";
  md.name = "General";
  EXPECT_EQ(metadata_tags(md),
            (std::vector<tag>{{"d", "general"}, {"name", "General"}, {"public"}, {"open"}}));
}

TEST(Nip29Tags, MetadataFullPrivate) {
  group_metadata md{"ops", "Ops", "On call", "https://x/p.png", false, 86400, true};
  EXPECT_EQ(metadata_tags(md), (std::vector<tag>{{"d", "ops"},
                                                 {"name", "Ops"},
                                                 {"about", "On call"},
                                                 {"picture", "https://x/p.png"},
                                                 {"private"},
                                                 {"closed"},
                                                 {"ttl", "86400"},
                                                 {"archived"}}));
}

TEST(Nip29Tags, MetadataPermanentHasNoTtl) {
  group_metadata md{"g", "G", "", "https://x", true, std::nullopt, false};
  EXPECT_EQ(metadata_tags(md),
            (std::vector<tag>{
                {"d", "g"}, {"name", "G"}, {"picture", "https://x"}, {"public"}, {"open"}}));
}

TEST(Nip29Tags, AdminsByPubkey) {
  roster r{{pk('9'), role::member}, {pk('8'), role::admin}, {pk('1'), role::owner},
           {pk('5'), role::bot},    {pk('3'), role::admin}, {pk('2'), role::guest}};
  EXPECT_EQ(admins_tags("g", r), (std::vector<tag>{{"d", "g"},
                                                   {"p", pk('1'), "owner"},
                                                   {"p", pk('3'), "admin"},
                                                   {"p", pk('8'), "admin"}}));
  EXPECT_EQ(admins_tags("g", roster{}), (std::vector<tag>{{"d", "g"}}));
}

TEST(Nip29Tags, MembersByPubkeyIncludingModerators) {
  EXPECT_EQ(members_tags("general", team()), (std::vector<tag>{{"d", "general"},
                                                              {"p", owner_pk, "", "owner"},
                                                              {"p", admin_pk, "", "admin"},
                                                              {"p", member_pk, "", "member"},
                                                              {"p", guest_pk, "", "guest"}}));
}

TEST(Nip29Tags, MembersHaveNoCap) {
  roster r;
  for (int i = 0; i < 1501; ++i) {
    char buf[65];
    std::snprintf(buf, sizeof buf, "%064x", i);
    r[buf] = i == 0 ? role::owner : role::member;
  }
  auto tags = members_tags("big", r);
  ASSERT_EQ(tags.size(), 1502u);
  EXPECT_EQ(tags[0], (tag{"d", "big"}));
  EXPECT_EQ(tags[1], (tag{"p", std::string(64, '0'), "", "owner"}));
  char last[65];
  std::snprintf(last, sizeof last, "%064x", 1500);
  EXPECT_EQ(tags.back(), (tag{"p", last, "", "member"}));
}
