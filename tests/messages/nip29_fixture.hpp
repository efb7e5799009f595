#pragma once

// The helpers of the NIP-29 tests (tests/messages/nip29_*_test.cpp): test
// pubkeys, signed commands, channel views and a roster, and the expectations
// on parse errors and refusals.

#include <gtest/gtest.h>

#include <cstdint>
#include <optional>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

#include "messages/proto/nip29.hpp"

namespace waggle::proto::nip29::test_support {

// BIP-340 vector 1 secret key; commands are signed like real ones even though
// the parse does not verify signatures.
constexpr std::string_view sk1 = "b7e151628aed2a6abf7158809cf4f3c762e7160f38b4da56a784d9045190cfef";

// Distinct, sortable pubkeys: "aaaa..." < "bbbb..." < ...
inline std::string pk(char c) { return std::string(64, c); }
const std::string owner_pk = pk('a');
const std::string admin_pk = pk('b');
const std::string member_pk = pk('c');
const std::string guest_pk = pk('d');
const std::string outsider_pk = pk('e');

inline event command(int32_t kind, std::vector<tag> tags) {
  event ev;
  ev.created_at = 1700000000;
  ev.kind = kind;
  ev.tags = std::move(tags);
  sign(ev, sk1);
  return ev;
}

inline event with_tags(int32_t kind, std::vector<tag> tags) {
  event ev;
  ev.kind = kind;
  ev.tags = std::move(tags);
  return ev;
}

inline group_command parsed(int32_t kind, std::vector<tag> tags) {
  auto r = parse_group_command(command(kind, std::move(tags)));
  EXPECT_TRUE(r.has_value()) << r.error().reason;
  return r.has_value() ? *r : group_command{};
}

inline void expect_parse_error(int32_t kind, std::vector<tag> tags, std::string_view reason_part) {
  auto r = parse_group_command(command(kind, std::move(tags)));
  ASSERT_FALSE(r.has_value()) << "accepted kind " << kind;
  EXPECT_EQ(r.error().code, ec::invalid);
  EXPECT_NE(r.error().reason.find(reason_part), std::string::npos)
      << "reason '" << r.error().reason << "' lacks '" << reason_part << "'";
}

inline void expect_refused(const status& s, ec code, std::string_view reason_part) {
  EXPECT_EQ(s.code, code);
  EXPECT_NE(s.reason.find(reason_part), std::string::npos)
      << "reason '" << s.reason << "' lacks '" << reason_part << "'";
}

template <class T>
inline void expect_refused(const result<T>& r, ec code, std::string_view reason_part) {
  ASSERT_FALSE(r.has_value());
  expect_refused(r.error(), code, reason_part);
}

inline channel_view open_channel() { return channel_view{true, false, false, true}; }
inline channel_view private_channel() { return channel_view{true, false, false, false}; }
inline channel_view archived_channel() { return channel_view{true, false, true, true}; }
inline channel_view deleted_channel() { return channel_view{true, true, false, true}; }
inline channel_view missing_channel() { return channel_view{false, false, false, true}; }

inline roster team() {
  return roster{{owner_pk, role::owner},
                {admin_pk, role::admin},
                {member_pk, role::member},
                {guest_pk, role::guest}};
}

inline group_command put(std::vector<user_role> users) {
  group_command c;
  c.kind = kind_put_user;
  c.group = "general";
  c.users = std::move(users);
  return c;
}

inline group_command removal(std::vector<std::string> pubkeys) {
  group_command c;
  c.kind = kind_remove_user;
  c.group = "general";
  for (auto& p : pubkeys)
    c.users.push_back({std::move(p), role::member});
  return c;
}

inline group_command simple(int32_t kind) {
  group_command c;
  c.kind = kind;
  c.group = "general";
  return c;
}

inline std::vector<roster_change> planned(const group_command& cmd, const std::string& actor,
                                          const channel_view& ch, const roster& members) {
  auto r = plan_membership(cmd, actor, ch, members);
  EXPECT_TRUE(r.has_value()) << r.error().reason;
  return r.has_value() ? *r : std::vector<roster_change>{};
}

}  // namespace waggle::proto::nip29::test_support

// In the type's namespace so std::vector's operator== and gtest find them.
namespace waggle::proto::nip29 {
inline bool operator==(const roster_change& a, const roster_change& b) {
  return a.pubkey == b.pubkey && a.new_role == b.new_role;
}
inline void PrintTo(const roster_change& c, std::ostream* os) {
  *os << c.pubkey.substr(0, 8) << "->" << (c.new_role ? name_of(*c.new_role) : "removed");
}
}  // namespace waggle::proto::nip29
