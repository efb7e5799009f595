#pragma once

// What the fanout hub takes, and what it passes on to connection actors:
// committed and ephemeral events, subscriptions, and the revocations of
// access that end them. Each struct's `inspect` is beside it; the type IDs
// are in messages/type_ids.hpp.
//
// The connection actor's interface is declared here, not in
// messages/interfaces.hpp: hub_subscribe carries its handle, and the
// interface names messages of this header, so it must come between them.

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <caf/meta/type_name.hpp>
#include <caf/replies_to.hpp>
#include <caf/typed_actor.hpp>

#include "messages/node.hpp"
#include "messages/proto/filter.hpp"
#include "messages/socket.hpp"
#include "messages/value_inspect.hpp"
#include "messages/values.hpp"

namespace waggle {

// -- hub -> connection actors ---------------------------------------------------

// Hub -> connection actor: one event for one or more of its subscriptions.
// Each sub id travels with the generation it was subscribed under, so an
// event matched for a subscription that has since been replaced or closed
// (and reopened under the same id) is recognised and dropped.
struct live_event {
  event_ptr ev;
  std::vector<std::string> sub_ids;
  std::vector<uint64_t> generations;  // parallel to sub_ids
  // The event's JSON alone, copied once by the hub and shared by every frame
  // that carries it. A frame sharing `ev` itself would pin the parsed tags
  // and content too, up to ten times what the session's byte cap counts for
  // it. Not serialized (the hub's peers are local); without it a frame
  // copies the JSON.
  std::shared_ptr<const std::string> raw;
};
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, live_event& x) {
  return f(caf::meta::type_name("live_event"), x.ev, x.sub_ids, x.generations);
}

// Group actor -> hub -> connection actors: read access to a channel ended.
// `pubkey` lost its membership (removed/left); or, with `pubkey` empty,
// the channel was deleted (`deleted`) or became private (every grant that
// rested on the channel being open ends).
struct channel_revoked {
  int64_t community_id = 0;
  std::string channel;
  std::string pubkey;
  bool deleted = false;
};
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, channel_revoked& x) {
  return f(caf::meta::type_name("channel_revoked"), x.community_id, x.channel, x.pubkey,
           x.deleted);
}

// Community watcher -> hub -> connection actors: access to the community
// ended for `pubkey` (removed or banned); with `pubkey` empty, the community
// stopped being open (every grant that rested on that ends).
struct access_revoked {
  int64_t community_id = 0;
  std::string pubkey;
};
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, access_revoked& x) {
  return f(caf::meta::type_name("access_revoked"), x.community_id, x.pubkey);
}

// Node -> every connection actor: `ip` was blocked in the community
// (NIP-86 blockip, on any node: each node's directory sees it within its
// refresh); a connection of that community from that address closes.
struct address_blocked {
  int64_t community_id = 0;
  std::string ip;
};
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, address_blocked& x) {
  return f(caf::meta::type_name("address_blocked"), x.community_id, x.ip);
}

// Connection actor: one per socket.
using connection_actor = caf::typed_actor<caf::reacts_to<socket_frame>,
                                          caf::reacts_to<socket_closed>,
                                          caf::reacts_to<socket_drained>,
                                          caf::reacts_to<history_stall_check>,
                                          caf::reacts_to<live_event>,
                                          caf::reacts_to<drain_request>,
                                          caf::reacts_to<channel_revoked>,
                                          caf::reacts_to<access_revoked>,
                                          caf::reacts_to<address_blocked>>;

// -- -> hub ---------------------------------------------------------------------

// Ingest (after COMMIT) or the ephemeral path -> fanout hub.
struct committed_events {
  std::vector<ingest_item> items;
};
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, committed_events& x) {
  return f(caf::meta::type_name("committed_events"), x.items);
}

// Connection actor -> hub; answered with hub_ack once the subscription is in
// the index, so that a history query issued afterwards cannot miss an event
// that the hub has not seen yet (see docs/architecture.md, REQ).
struct hub_subscribe {
  connection_actor conn;
  int64_t community_id = 0;
  std::string sub_id;
  uint64_t generation = 0;  // the connection's REQ number for this sub id
  std::vector<proto::filter> filters;
};
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, hub_subscribe& x) {
  return f(caf::meta::type_name("hub_subscribe"), x.conn, x.community_id, x.sub_id, x.generation,
           x.filters);
}

struct hub_ack {};
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, hub_ack&) {
  return f(caf::meta::type_name("hub_ack"));
}

// Connection actor -> hub: an ephemeral event to fan out, answered with
// hub_ack once it has been handed to its subscribers. Until then it counts
// in the connection's events in flight, so a flood meets the same cap as
// stored events instead of going straight to the hub's mailbox.
struct ephemeral_publish {
  ingest_item item;
};
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, ephemeral_publish& x) {
  return f(caf::meta::type_name("ephemeral_publish"), x.item);
}

struct hub_unsubscribe {
  connection_actor conn;
  std::string sub_id;
};
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, hub_unsubscribe& x) {
  return f(caf::meta::type_name("hub_unsubscribe"), x.conn, x.sub_id);
}

}  // namespace waggle
