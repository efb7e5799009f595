#pragma once

// Typed interfaces of the node's actors. A handler's signature here is the
// whole contract between two actors; docs/architecture.md describes each.

#include <caf/replies_to.hpp>
#include <caf/stateful_actor.hpp>
#include <caf/typed_actor.hpp>
#include <caf/typed_event_based_actor.hpp>
#include <caf/typed_response_promise.hpp>

#include "messages/types.hpp"

namespace waggle {

// Ingest: the writer pool with group commit (DESIGN §4).
using ingest_actor = caf::typed_actor<caf::replies_to<ingest_request>::with<ingest_reply>>;

// One writer session: owns one writer connection, runs one batch at a time.
using writer_actor
  = caf::typed_actor<caf::replies_to<write_batch_request>::with<write_batch_reply>>;

// Fanout hub: the local subscription index.
using hub_actor = caf::typed_actor<caf::reacts_to<committed_events>,
                                   caf::replies_to<hub_subscribe>::with<hub_ack>,
                                   caf::reacts_to<hub_unsubscribe>>;

// Reader pool (and each reader session): history and counts.
using reader_actor = caf::typed_actor<caf::replies_to<history_request>::with<history_reply>,
                                      caf::replies_to<count_request>::with<count_reply>>;

// Connection actor: one per socket.
using connection_actor = caf::typed_actor<caf::reacts_to<socket_frame>,
                                          caf::reacts_to<socket_closed>,
                                          caf::reacts_to<live_event>,
                                          caf::reacts_to<drain_request>>;

}  // namespace waggle
