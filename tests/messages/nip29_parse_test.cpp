// NIP-29 on the wire (messages/proto/nip29.hpp): roles and group ids, the
// channel an event belongs to (channel_of), the parse of the commands
// (9000-9022), and the tags of the relay-signed state events (39000-39002).
// Who may do what: nip29_rules_test.cpp. Helpers: nip29_fixture.hpp.

#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "tests/messages/nip29_fixture.hpp"

using namespace waggle;
using namespace waggle::proto;
using namespace waggle::proto::nip29;
using namespace waggle::proto::nip29::test_support;

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
