#pragma once

// The access a stored event may have ended, read from the event alone: a
// NIP-29 removal, leave, deletion or switch to private of a channel. (Who
// lost access to a whole community the cluster tail reads from
// community_changes, which holds bans and policy changes too.) Used where the
// outcome in the database is not at hand: the group actor after a command
// whose outcome is uncertain, and the hub for events another node committed
// (the cluster tail brings them in commit order, so the revocation reaches
// the connections before any later event). Fail closed: a revocation that
// turns out unnecessary only makes a client send its REQ again.

#include <vector>

#include "messages/fanout.hpp"
#include "messages/proto/event.hpp"

namespace waggle {

struct revocations {
  std::vector<channel_revoked> channels;
  bool empty() const { return channels.empty(); }
};

revocations revocations_of(int64_t community_id, const proto::event& ev);

}  // namespace waggle
