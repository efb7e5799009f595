#pragma once

// Where an admitted, storable event goes and how its reply comes back: the
// group actor for NIP-29 commands, ingest for everything else, the same for
// the connection actor and the HTTP submit actor. Either way the answer
// arrives only after the event's transaction committed (or definitely failed).

#include <utility>

#include <caf/event_based_actor.hpp>

#include "messages/interfaces.hpp"
#include "messages/proto/nip29.hpp"

namespace waggle {

struct store_peers {
  ingest_actor ingest;
  group_actor group;
};

// Calls `on_reply(ingest_reply&)` exactly once. A request error means the
// outcome is unknown to us: it is answered `failed`, never a false OK.
template <class Self, class OnReply>
void request_store(Self* self, const store_peers& peers, caf::timespan timeout,
                   int64_t community_id, event_ptr ev, OnReply on_reply) {
  auto on_error = [on_reply](const char* who) {
    return [on_reply, who](caf::error&) mutable {
      ingest_reply failed{write_outcome::failed, std::string{who} + " unavailable"};
      on_reply(failed);
    };
  };
  if (proto::nip29::is_group_command(ev->kind))
    self->request(peers.group, timeout, group_request{community_id, std::move(ev)})
      .then(on_reply, on_error("group actor"));
  else
    self->request(peers.ingest, timeout, ingest_request{community_id, std::move(ev)})
      .then(on_reply, on_error("ingest"));
}

}  // namespace waggle
