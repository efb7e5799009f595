// NIP-29 membership and permission rules, pure: who may post, read, create,
// moderate, and the roster changes a membership command makes. Parsing a
// command's tags is in nip29.cpp.
#include "messages/proto/nip29.hpp"
#include "messages/proto/nip29_detail.hpp"

#include <algorithm>

namespace waggle::proto::nip29 {

namespace {

using internal::invalid;
status restricted(std::string reason) { return status{ec::restricted, std::move(reason)}; }

// Reasons shared by several rules, so clients see the same words for the same refusal.
constexpr std::string_view no_such_channel = "no such channel";
constexpr std::string_view channel_deleted = "channel was deleted";
constexpr std::string_view channel_archived = "channel is archived";

// The channel must exist and not be deleted: shared by every rule that acts on one.
status check_live(const channel_view& ch) {
  if (!ch.exists)
    return restricted(std::string(no_such_channel));
  if (ch.deleted)
    return restricted(std::string(channel_deleted));
  return {};
}

std::optional<role> role_in(const roster& members, const std::string& pubkey) {
  auto it = members.find(pubkey);
  if (it == members.end())
    return std::nullopt;
  return it->second;
}

size_t owner_count(const roster& members) {
  return static_cast<size_t>(std::count_if(members.begin(), members.end(), [](const auto& m) {
    return m.second == role::owner;
  }));
}

}  // namespace

status may_post(const channel_view& ch, std::optional<role> author_role) {
  if (status s = check_live(ch); !s.ok())
    return s;
  if (ch.archived)
    return restricted(std::string(channel_archived));
  if (!author_role)
    return restricted(ch.open ? "not a member of this channel; join it with kind 9021"
                              : "not a member of this private channel");
  return {};
}

status may_read(const channel_view& ch, size_t member_count) {
  // A private channel the reader is not in is refused in the words used for
  // one that does not exist: a read (REQ, COUNT, NIP-77) must not tell a
  // non-member which private channels there are.
  if (!ch.exists || (!ch.open && member_count == 0))
    return restricted("no such channel, or a private channel you are not a member of");
  // Archived channels stay readable: archiving stops writes, not history.
  if (status s = check_live(ch); !s.ok())
    return s;
  return {};
}

result<std::vector<roster_change>> plan_membership(const group_command& cmd,
                                                   const std::string& actor,
                                                   const channel_view& ch, const roster& members) {
  const int32_t k = cmd.kind;
  if (k != kind_put_user && k != kind_remove_user && k != kind_join_request &&
      k != kind_leave_request)
    return invalid("not a membership command: " + std::to_string(k));
  if (status s = check_live(ch); !s.ok())
    return s;
  // Leaving an archived channel is allowed so people can tidy their list.
  if (ch.archived && k != kind_leave_request)
    return restricted(std::string(channel_archived));

  const std::optional<role> actor_role = role_in(members, actor);
  // Changes are applied to a copy one by one, then the whole result is checked
  // (the last-owner rule is about the roster the command leaves behind).
  roster after = members;
  std::vector<std::string> touched;  // command order, each once
  auto touch = [&](const std::string& pk) {
    if (std::find(touched.begin(), touched.end(), pk) == touched.end())
      touched.push_back(pk);
  };
  std::string_view last_owner_reason;

  switch (k) {
    case kind_put_user: {
      if (!actor_role || !moderates(*actor_role))
        return restricted("only an owner or admin can add users or change roles");
      for (const auto& u : cmd.users) {
        const std::optional<role> current = role_in(after, u.pubkey);
        if (current == u.r)
          continue;
        if (*actor_role != role::owner) {
          if (moderates(u.r))
            return restricted("only an owner can grant the owner or admin role");
          if (current && moderates(*current))
            return restricted("only an owner can change an owner's or admin's role");
        }
        after[u.pubkey] = u.r;
        touch(u.pubkey);
      }
      last_owner_reason = "the last owner cannot be demoted";
      break;
    }
    case kind_remove_user: {
      if (!actor_role || !moderates(*actor_role))
        return restricted("only an owner or admin can remove users");
      for (const auto& u : cmd.users) {
        const std::optional<role> current = role_in(after, u.pubkey);
        if (!current)
          continue;
        if (*actor_role != role::owner && moderates(*current))
          return restricted("only an owner can remove an owner or admin");
        after.erase(u.pubkey);
        touch(u.pubkey);
      }
      last_owner_reason = "the last owner cannot be removed";
      break;
    }
    case kind_join_request: {
      // Checked before visibility: a member re-sending a join is harmless, even when private.
      if (actor_role)
        return std::vector<roster_change>{};
      if (!ch.open)
        return restricted("private channel: an admin must add you");
      after[actor] = role::member;
      touch(actor);
      break;
    }
    case kind_leave_request: {
      if (!actor_role)
        return restricted("not a member of this channel");
      after.erase(actor);
      touch(actor);
      last_owner_reason = "the last owner cannot leave";
      break;
    }
  }

  // A roster that already has no owner (not expected) must not block every
  // other change; the rule is that a command may not take the last one away.
  if (owner_count(members) > 0 && owner_count(after) == 0)
    return restricted(std::string(last_owner_reason));

  std::vector<roster_change> changes;
  for (const auto& pk : touched) {
    const std::optional<role> before_r = role_in(members, pk);
    const std::optional<role> after_r = role_in(after, pk);
    if (before_r != after_r)
      changes.push_back(roster_change{pk, after_r});
  }
  return changes;
}

status authorize(const group_command& cmd, const std::string& actor, const channel_view& ch,
                 const roster& members) {
  const int32_t k = cmd.kind;
  if (k != kind_edit_metadata && k != kind_delete_event && k != kind_delete_group)
    return invalid("not a moderation command: " + std::to_string(k));
  if (status s = check_live(ch); !s.ok())
    return s;
  const std::optional<role> r = role_in(members, actor);
  if (k == kind_delete_group) {
    if (r != role::owner)
      return restricted("only an owner can delete the channel");
    return {};
  }
  if (!r || !moderates(*r))
    return restricted(k == kind_edit_metadata ? "only an owner or admin can edit the channel"
                                              : "only an owner or admin can delete events");
  return {};
}

status may_create(const channel_view& ch) {
  if (ch.exists || ch.deleted)
    return invalid("group already exists");
  return {};
}

}  // namespace waggle::proto::nip29
