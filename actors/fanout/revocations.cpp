#include "actors/fanout/revocations.hpp"

#include "messages/proto/nip29.hpp"

namespace waggle {

revocations revocations_of(int64_t community_id, const proto::event& ev) {
  namespace nip29 = proto::nip29;
  revocations out;
  auto cmd = nip29::parse_group_command(ev);
  if (!cmd)
    return out;
  switch (cmd->kind) {
    case nip29::kind_remove_user:
      for (const auto& u : cmd->users)
        out.channels.push_back(channel_revoked{community_id, cmd->group, u.pubkey, false});
      break;
    case nip29::kind_leave_request:
      out.channels.push_back(channel_revoked{community_id, cmd->group, ev.pubkey, false});
      break;
    case nip29::kind_delete_group:
      out.channels.push_back(channel_revoked{community_id, cmd->group, "", true});
      break;
    case nip29::kind_edit_metadata:
      if (cmd->is_private.value_or(false))
        out.channels.push_back(channel_revoked{community_id, cmd->group, "", false});
      break;
    default:
      break;
  }
  return out;
}

}  // namespace waggle
