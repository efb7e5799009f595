#pragma once

// The bus (docs/bus.md): publish/subscribe between the actors of one node
// and between nodes, behind one typed interface whatever the driver
// (in-process, PostgreSQL, CAF). Each struct's `inspect` is beside it; the
// type IDs are in messages/type_ids.hpp.
//
// The subscriber's interface is declared here, not in messages/interfaces.hpp:
// bus_subscribe carries its handle.

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <caf/atom.hpp>
#include <caf/error.hpp>
#include <caf/meta/type_name.hpp>
#include <caf/replies_to.hpp>
#include <caf/typed_actor.hpp>

namespace waggle {

// -- limits and identity --------------------------------------------------------

// The largest payload a driver carries in one message (bytes), and the
// longest subject or queue-group name.
constexpr size_t bus_max_payload = 1024 * 1024;
constexpr size_t bus_max_subject = 200;
// PostgreSQL doorbell channels (waggle_bus_0 .. waggle_bus_31).
constexpr uint32_t bus_shard_count = 32;

// A subject or group is 1..bus_max_subject bytes of visible ASCII
// (0x21-0x7e): no spaces or control characters, so it can be logged (the
// NATS driver escapes what NATS reads as wildcards). Subjects are matched exactly: there are
// no wildcards.
bool bus_valid_name(std::string_view name);

// The stable, specified hash of a subject (64-bit FNV-1a over its bytes),
// an index key only: every match compares the exact text. Nodes built by
// any compiler agree on it, and so on a subject's shard.
uint64_t bus_subject_hash(std::string_view subject);
uint32_t bus_shard_of(std::string_view subject);

// -- errors -----------------------------------------------------------------------

// Every error a bus answers with, in the category "bus"
// (caf::error{code, caf::atom("bus")}; register_types names them).
enum class bus_errc : uint8_t {
  bad_subject = 1,        // empty, too long, or not visible ASCII
  payload_too_large = 2,  // over bus_max_payload
  no_responders = 3,      // a request to a subject nobody subscribes to
  request_timeout = 4,    // no reply before the request's deadline
  unavailable = 5,        // the driver cannot reach its transport (PostgreSQL down)
  bad_group = 6,          // a queue group name that is not a valid name
  overloaded = 7,         // the driver's queue toward its transport is full
};
caf::error make_error(bus_errc code, std::string context = {});
// True when `err` is the bus's `code`.
bool bus_error_is(const caf::error& err, bus_errc code);
const char* to_string(bus_errc code);

// -- subscriber side --------------------------------------------------------------

// Bus -> subscriber: one message on a subject it subscribed to. `reply_to`
// is set when the publisher is waiting for an answer: publish it there.
struct bus_message {
  std::string subject;
  std::string payload;
  std::string reply_to;
};
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, bus_message& x) {
  return f(caf::meta::type_name("bus_message"), x.subject, x.payload, x.reply_to);
}

// Bus -> subscriber: messages on `subject` were lost to this subscriber
// (it fell behind the driver's retention, or its node lost the transport
// for longer); `missed` counts them when the driver knows, else 0.
struct bus_lagged {
  std::string subject;
  uint64_t missed = 0;
};
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, bus_lagged& x) {
  return f(caf::meta::type_name("bus_lagged"), x.subject, x.missed);
}

using bus_subscriber_actor
  = caf::typed_actor<caf::reacts_to<bus_message>, caf::reacts_to<bus_lagged>>;

// -- bus side ---------------------------------------------------------------------

// Anyone -> bus: publish. Answered with bus_ack once the driver has taken
// it (docs/bus.md says what that means per driver), or with a bus_errc.
struct bus_publish {
  std::string subject;
  std::string payload;
  std::string reply_to;
};
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, bus_publish& x) {
  return f(caf::meta::type_name("bus_publish"), x.subject, x.payload, x.reply_to);
}

struct bus_ack {
  uint64_t id = 0;  // the driver's id of the message (0 where it keeps none)
};
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, bus_ack& x) {
  return f(caf::meta::type_name("bus_ack"), x.id);
}

// Anyone -> bus: `subscriber` receives every message on `subject` published
// after the bus_subscription reply; with a `group`, each message goes to one
// member of the group only (queue subscription). A subscriber that
// terminates is unsubscribed.
struct bus_subscribe {
  std::string subject;
  std::string group;
  bus_subscriber_actor subscriber;
};
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, bus_subscribe& x) {
  return f(caf::meta::type_name("bus_subscribe"), x.subject, x.group, x.subscriber);
}

struct bus_subscription {
  uint64_t id = 0;  // unique on this node, never reused
};
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, bus_subscription& x) {
  return f(caf::meta::type_name("bus_subscription"), x.id);
}

struct bus_unsubscribe {
  uint64_t id = 0;
};
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, bus_unsubscribe& x) {
  return f(caf::meta::type_name("bus_unsubscribe"), x.id);
}

// Anyone -> bus: publish `payload` on `subject` and answer with the first
// reply (a bus_message on the request's inbox), or with no_responders at
// once when nobody subscribes to `subject`, or request_timeout after
// `timeout_ms`.
struct bus_request {
  std::string subject;
  std::string payload;
  uint32_t timeout_ms = 5000;
};
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, bus_request& x) {
  return f(caf::meta::type_name("bus_request"), x.subject, x.payload, x.timeout_ms);
}

// A bus to itself: the request whose inbox is `inbox` ran out of time.
struct bus_request_expired {
  std::string inbox;
};
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, bus_request_expired& x) {
  return f(caf::meta::type_name("bus_request_expired"), x.inbox);
}

using bus_actor = caf::typed_actor<caf::replies_to<bus_publish>::with<bus_ack>,
                                   caf::replies_to<bus_subscribe>::with<bus_subscription>,
                                   caf::reacts_to<bus_unsubscribe>,
                                   caf::replies_to<bus_request>::with<bus_message>>;

}  // namespace waggle

namespace waggle {

// The checks every driver makes before it takes a message: an empty error
// when the input is well formed.
caf::error bus_validate(const bus_publish& x);
caf::error bus_validate(const bus_subscribe& x);
caf::error bus_validate(const bus_request& x);

}  // namespace waggle

// -- the PostgreSQL driver's own messages (actors/bus/pg_*) --------------------------

namespace waggle {

// Facade -> publisher: one batch, stored in one transaction. A request's
// message (`needs_responders`) is stored only if a live node subscribes.
struct bus_outgoing {
  std::string subject;
  std::string payload;
  std::string reply_to;
  bool needs_responders = false;
};
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, bus_outgoing& x) {
  return f(caf::meta::type_name("bus_outgoing"), x.subject, x.payload, x.reply_to,
           x.needs_responders);
}

struct bus_store_batch {
  std::vector<bus_outgoing> messages;
};
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, bus_store_batch& x) {
  return f(caf::meta::type_name("bus_store_batch"), x.messages);
}

// Publisher -> facade: the batch's ids (0: a request nobody responds to), or
// the error that stored none of it.
struct bus_batch_stored {
  std::vector<int64_t> ids;
  std::string error;
};
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, bus_batch_stored& x) {
  return f(caf::meta::type_name("bus_batch_stored"), x.ids, x.error);
}

// Publisher -> doorbell: shards that have new messages.
// Fetcher -> listener: the shards this node wants (all of them, each time).
// Listener -> fetcher: fetch these shards now (empty: every shard).
struct bus_shards {
  std::vector<int32_t> shards;
};
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, bus_shards& x) {
  return f(caf::meta::type_name("bus_shards"), x.shards);
}

// Facade -> fetcher: start or stop reading `subject` for a plain subscriber
// (empty group), a member of `group`, or a request's inbox (`inbox`, which
// is not registered as a responder). The reply to a watch comes after every
// message committed before it was handed over, so a new subscriber gets
// only later ones.
struct bus_watch {
  std::string subject;
  std::string group;
  bool inbox = false;
  bool add = true;
};
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, bus_watch& x) {
  return f(caf::meta::type_name("bus_watch"), x.subject, x.group, x.inbox, x.add);
}

// Fetcher -> facade: fetched messages, each with the queue groups this node
// claimed it for; or a lag notice for subjects.
struct bus_fetched {
  std::vector<bus_message> messages;
  std::vector<std::vector<std::string>> groups;  // parallel to messages
  std::vector<std::string> lagged;               // subjects whose subscribers lost messages
};
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, bus_fetched& x) {
  return f(caf::meta::type_name("bus_fetched"), x.messages, x.groups, x.lagged);
}

// Anyone -> PostgreSQL facade -> fetcher -> listener: the shards whose
// channels the listener's connection LISTENs on, as the server tells
// (pg_listening_channels()); an error when it is not connected.
struct bus_listening {};
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, bus_listening&) {
  return f(caf::meta::type_name("bus_listening"));
}

// A timer a bus actor sends itself (the fetcher's poll, the doorbell's
// trailing edge, the listener's loop, the registry's heartbeat).
struct bus_tick {
  int32_t kind = 0;
};
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, bus_tick& x) {
  return f(caf::meta::type_name("bus_tick"), x.kind);
}

}  // namespace waggle

// -- the CAF driver's own messages (actors/bus/caf_*) ------------------------------

namespace waggle {

// Registry -> CAF facade: the live nodes of the cluster (but this one).
struct bus_peer_info {
  std::string node_id;
  std::string address;
  uint16_t port = 0;
  int32_t protocol_version = 0;
};
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, bus_peer_info& x) {
  return f(caf::meta::type_name("bus_peer_info"), x.node_id, x.address, x.port,
           x.protocol_version);
}

struct bus_peers {
  std::vector<bus_peer_info> live;
};
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, bus_peers& x) {
  return f(caf::meta::type_name("bus_peers"), x.live);
}

// Node -> node: one frame of the peer protocol. `body` is a bus_interest
// (kind interest) or a bus_forward (kind forward), serialised by its
// inspect; a body that does not decode is dropped and counted, never trusted.
struct bus_peer_frame {
  std::string node_id;  // the sender
  int32_t kind = 0;
  std::string body;
};
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, bus_peer_frame& x) {
  return f(caf::meta::type_name("bus_peer_frame"), x.node_id, x.kind, x.body);
}
constexpr int32_t bus_frame_interest = 1;
constexpr int32_t bus_frame_forward = 2;
// Empty body, answered once the receiver took every forward sent before it.
constexpr int32_t bus_frame_sync = 3;

// Node -> node: a bus_forward (serialised in `body`), sent with the sending
// facade as sender and answered by nothing (at most once): a frame that
// wanted a reply would double the messages between nodes.
struct bus_peer_forward {
  std::string node_id;  // the sender; must be the peer known by this handle
  std::string body;
};
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, bus_peer_forward& x) {
  return f(caf::meta::type_name("bus_peer_forward"), x.node_id, x.body);
}

// Everything a node subscribes to: parallel lists, an empty group for plain
// subscriptions. Sent whole on connect and after every change.
struct bus_interest {
  std::vector<std::string> subjects;
  std::vector<std::string> groups;
};
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, bus_interest& x) {
  return f(caf::meta::type_name("bus_interest"), x.subjects, x.groups);
}

// One message for a peer: to its plain subscribers (`plain`) and to one
// member each of `groups` (the publisher chose this node for them).
struct bus_forward {
  std::string subject;
  std::string payload;
  std::string reply_to;
  bool plain = false;
  std::vector<std::string> groups;
};
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, bus_forward& x) {
  return f(caf::meta::type_name("bus_forward"), x.subject, x.payload, x.reply_to, x.plain,
           x.groups);
}

}  // namespace waggle

// -- the NATS driver's own messages (actors/bus/nats_*) -----------------------------

namespace waggle {

// libnats callback -> NATS facade: one message of the NATS subscription
// `sid` (the subject and reply already mapped back to bus subjects).
// `seq` is the subscription's delivered count at this message (low 32 bits),
// which a subscriber that joined a shared subscription compares with the
// count it joined at; `missed` counts messages of this subscription dropped
// before this one; `no_responders` marks the server's status message for a
// request nobody subscribes to.
struct nats_delivery {
  int64_t sid = 0;
  uint32_t seq = 0;
  uint64_t missed = 0;
  bool no_responders = false;
  bus_message msg;
};
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, nats_delivery& x) {
  return f(caf::meta::type_name("nats_delivery"), x.sid, x.seq, x.missed, x.no_responders, x.msg);
}

// libnats connection callback -> NATS facade: the link to the server went
// down or came back (`connected`), or libnats reports an error (`error`).
struct nats_link_event {
  bool connected = false;
  std::string error;
};
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, nats_link_event& x) {
  return f(caf::meta::type_name("nats_link_event"), x.connected, x.error);
}

}  // namespace waggle
