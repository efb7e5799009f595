// NIP-29 commands as tags: the parse and validation of a command event (its
// `h`, `p`, `e` and metadata tags), roles by name, group ids, and the tags of
// the relay-signed state events. The membership and permission rules are in
// nip29_rules.cpp.
#include "messages/proto/nip29.hpp"
#include "messages/proto/json_detail.hpp"
#include "messages/proto/nip29_detail.hpp"

#include <algorithm>
#include <set>

namespace waggle::proto::nip29 {

namespace internal {

status invalid(std::string reason) { return status{ec::invalid, std::move(reason)}; }

}  // namespace internal

namespace {

using internal::invalid;

// Limits of the metadata a 9002/9007 may set (bytes, as stored).
constexpr size_t max_name_len = 128;
constexpr size_t max_about_len = 2048;
constexpr size_t max_picture_len = 1024;
constexpr int64_t max_ttl_seconds = 366 * 86400;

// "ttl" values: plain decimal digits only (no sign, no spaces, no exponent), so
// "-5", "+5", "1e3" and "" are all refused as non-numeric.
result<std::optional<int32_t>> parse_ttl(std::string_view s) {
  if (s.empty() || !std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; }))
    return invalid("ttl must be a non-negative number of seconds");
  // Leading zeros are harmless; skip them so the length check below bounds the value.
  while (s.size() > 1 && s.front() == '0')
    s.remove_prefix(1);
  if (s.size() > 10)
    return invalid("ttl must be at most 366 days (31622400 seconds)");
  int64_t v = 0;
  for (char c : s)
    v = v * 10 + (c - '0');
  if (v > max_ttl_seconds)
    return invalid("ttl must be at most 366 days (31622400 seconds)");
  if (v == 0)
    return std::optional<int32_t>{};  // permanent
  return std::optional<int32_t>{static_cast<int32_t>(v)};
}

// A metadata text field: one tag only, with a value, within its byte limit.
status parse_text_field(const tag& t, size_t max_len, std::optional<std::string>& out) {
  const std::string& name = t[0];
  if (out)
    return invalid("duplicate " + name + " tag");
  if (t.size() < 2)
    return invalid(name + " tag without a value");
  if (t[1].size() > max_len)
    return invalid(name + " too long (max " + std::to_string(max_len) + " bytes)");
  if (status s = check_relay_text(name, t[1]); !s.ok())
    return s;
  out = t[1];
  return {};
}

// The metadata tags of 9002 / 9007. Tags not listed here are ignored (NIP-29
// allows clients to add others, e.g. `previous`).
status parse_metadata(const event& ev, group_command& cmd) {
  bool seen_ttl = false;
  for (const auto& t : ev.tags) {
    if (t.empty())
      continue;
    const std::string& name = t[0];
    if (name == "name") {
      if (status s = parse_text_field(t, max_name_len, cmd.name); !s.ok())
        return s;
    } else if (name == "about") {
      if (status s = parse_text_field(t, max_about_len, cmd.about); !s.ok())
        return s;
    } else if (name == "picture") {
      if (status s = parse_text_field(t, max_picture_len, cmd.picture); !s.ok())
        return s;
    } else if (name == "private" || name == "public" || name == "closed" || name == "open") {
      // waggle ties read access and join policy together (private channels are
      // closed, open ones public), so "closed" means private and "open" public.
      const bool priv = name == "private" || name == "closed";
      if (cmd.is_private && *cmd.is_private != priv)
        return invalid("conflicting visibility tags (private/closed and public/open)");
      cmd.is_private = priv;
    } else if (name == "ttl") {
      if (seen_ttl)
        return invalid("duplicate ttl tag");
      seen_ttl = true;
      if (t.size() < 2)
        return invalid("ttl tag without a value");
      auto ttl = parse_ttl(t[1]);
      if (!ttl)
        return ttl.error();
      cmd.ttl_seconds = *ttl;
    }
  }
  return {};
}

// The `p` tags of 9000 / 9001 (at least one). 9000 reads a role; 9001 ignores it.
status parse_users(const event& ev, group_command& cmd) {
  const bool with_role = ev.kind == kind_put_user;
  std::set<std::string> seen;
  for (const auto& t : ev.tags) {
    if (t.empty() || t[0] != "p")
      continue;
    if (t.size() < 2 || !is_lower_hex(t[1], 64))
      return invalid("p tag must hold a 64-character lowercase hex pubkey");
    user_role u{t[1], role::member};
    // NIP-29 allows several roles per user; waggle gives one, the first. An
    // empty third element is treated as "no role" (the NIP-01 habit of an
    // empty relay hint there), so it means member.
    if (with_role && t.size() >= 3 && !t[2].empty()) {
      auto r = parse_role(t[2]);
      if (!r)
        return invalid("unknown role: " + detail::printable_excerpt(t[2], 32) +
                       " (owner, admin, member, guest or bot)");
      u.r = *r;
    }
    if (!seen.insert(u.pubkey).second) {
      // Two roles for one user in one command is ambiguous; removing twice is not.
      if (with_role)
        return invalid("a user appears in several p tags");
      continue;
    }
    cmd.users.push_back(std::move(u));
  }
  if (cmd.users.empty())
    return invalid("missing p tag (the user)");
  return {};
}

status parse_event_ids(const event& ev, group_command& cmd) {
  std::set<std::string> seen;
  for (const auto& t : ev.tags) {
    if (t.empty() || t[0] != "e")
      continue;
    if (t.size() < 2 || !is_lower_hex(t[1], 64))
      return invalid("e tag must hold a 64-character lowercase hex event id");
    if (seen.insert(t[1]).second)
      cmd.event_ids.push_back(t[1]);
  }
  if (cmd.event_ids.empty())
    return invalid("missing e tag (the event to delete)");
  return {};
}

}  // namespace

status check_relay_text(std::string_view field, std::string_view value) {
  for (unsigned char c : value)
    if (c < 0x20 || c == 0x7f)
      return invalid(std::string(field) + " must not contain control characters (U+0000-U+001F, "
                                          "U+007F)");
  return {};
}

std::optional<role> parse_role(std::string_view name) {
  if (name == "owner")
    return role::owner;
  if (name == "admin")
    return role::admin;
  if (name == "member")
    return role::member;
  if (name == "guest")
    return role::guest;
  if (name == "bot")
    return role::bot;
  return std::nullopt;
}

std::string_view name_of(role r) {
  switch (r) {
    case role::owner: return "owner";
    case role::admin: return "admin";
    case role::member: return "member";
    case role::guest: return "guest";
    case role::bot: return "bot";
  }
  return "member";
}

bool valid_group_id(std::string_view id) {
  if (id.empty() || id.size() > 64)
    return false;
  return std::all_of(id.begin(), id.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
  });
}

result<std::optional<std::string>> channel_of(const event& ev) {
  // State events name their group with `d`; an `h` on them must not file them
  // into a channel's timeline.
  if (is_group_state(ev.kind))
    return std::optional<std::string>{};
  const tag* h = nullptr;
  for (const auto& t : ev.tags) {
    if (t.empty() || t[0] != "h")
      continue;
    if (h)
      return invalid("an event belongs to at most one channel (several h tags)");
    h = &t;
  }
  if (!h)
    return std::optional<std::string>{};
  if (h->size() < 2)
    return invalid("h tag without a value");
  if (!valid_group_id((*h)[1]))
    return invalid("bad channel id in h tag (1-64 characters of a-z, 0-9, _ and -)");
  return std::optional<std::string>{(*h)[1]};
}

result<group_command> parse_group_command(const event& ev) {
  if (!is_group_command(ev.kind))
    return invalid("not a group command kind: " + std::to_string(ev.kind));
  group_command cmd;
  cmd.kind = ev.kind;
  auto ch = channel_of(ev);
  if (!ch)
    return ch.error();
  if (!*ch)
    return invalid("missing h tag (the group id)");
  cmd.group = std::move(**ch);

  status s;
  switch (ev.kind) {
    case kind_put_user:
    case kind_remove_user: s = parse_users(ev, cmd); break;
    case kind_delete_event: s = parse_event_ids(ev, cmd); break;
    case kind_edit_metadata:
    case kind_create_group: s = parse_metadata(ev, cmd); break;
    default: break;  // 9008, 9021, 9022: the group is all they need
  }
  if (!s.ok())
    return s;
  return cmd;
}

std::vector<tag> metadata_tags(const group_metadata& md) {
  std::vector<tag> out;
  out.reserve(8);
  out.push_back({"d", md.id});
  out.push_back({"name", md.name});
  if (!md.about.empty())
    out.push_back({"about", md.about});
  if (!md.picture.empty())
    out.push_back({"picture", md.picture});
  out.push_back({md.open ? "public" : "private"});
  out.push_back({md.open ? "open" : "closed"});
  if (md.ttl_seconds && *md.ttl_seconds > 0)
    out.push_back({"ttl", std::to_string(*md.ttl_seconds)});
  if (md.archived)
    out.push_back({"archived"});
  return out;
}

std::vector<tag> admins_tags(const std::string& group, const roster& members) {
  std::vector<tag> out;
  out.push_back({"d", group});
  // std::map iterates by pubkey, which is the documented order.
  for (const auto& [pk, r] : members)
    if (moderates(r))
      out.push_back({"p", pk, std::string(name_of(r))});
  return out;
}

std::vector<tag> members_tags(const std::string& group, const roster& members) {
  std::vector<tag> out;
  out.reserve(members.size() + 1);
  out.push_back({"d", group});
  for (const auto& [pk, r] : members)
    out.push_back({"p", pk, "", std::string(name_of(r))});
  return out;
}

}  // namespace waggle::proto::nip29
