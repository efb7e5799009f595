#pragma once

// Every message that crosses an actor boundary, in ONE type-ID block, each with
// an `inspect` so it can be serialised for the cluster and for traces.
// Handlers never receive raw tuples of strings: each input is a named type.

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <caf/actor.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/atom.hpp>
#include <caf/meta/type_name.hpp>
#include <caf/type_id.hpp>

#include "messages/proto/event.hpp"
#include "messages/proto/filter.hpp"
#include "messages/proto/status.hpp"
#include "messages/proto/write_policy.hpp"
#include "messages/delivery.hpp"
#include "messages/http_api.hpp"
#include "messages/push.hpp"
#include "messages/values.hpp"

namespace waggle {

// -- socket edge (gateway -> connection actor) --------------------------------

struct socket_frame {
  std::string text;
};

struct socket_closed {};

// Socket -> connection actor: its outbound queue fell to its low-water mark
// (the answer to socket_sink::notify_drained); frames and bytes that may be
// queued now without nearing the cap. A large history goes out in such slices.
struct socket_drained {
  uint64_t frames = 0;
  uint64_t bytes = 0;
};

// A connection actor's timer (to itself) for the history stall rule: its
// queued histories are ended if the socket took no slice of them for
// --history-stall-seconds (actors/connection/history_sender.cpp).
struct history_stall_check {};

// -- ingest -------------------------------------------------------------------

// Connection actor -> ingest. Answered with an ingest_reply only after the
// event's transaction committed (or definitely failed).
struct ingest_request {
  int64_t community_id = 0;
  event_ptr ev;
};

struct ingest_reply {
  write_outcome outcome = write_outcome::failed;
  std::string reason;
};

// Ingest -> writer session: one transaction for all of it.
struct write_batch_request {
  std::vector<ingest_item> items;
  // The push gate (docs/push.md, "The gate cache"): every community's push
  // events run the gate statement when `push_gate_all`, otherwise only
  // those of `push_gated`.
  bool push_gate_all = true;
  std::vector<int64_t> push_gated;
  // One push lease (kind 30350), accepted in its own transaction; `push_skipped`
  // are the events ingest stored without the gate statement in its community.
  bool lease = false;
  std::vector<std::string> push_skipped;
};

struct write_batch_reply {
  std::vector<write_result> results;
  double commit_seconds = 0;
};

// -- fanout -------------------------------------------------------------------

// Ingest (after COMMIT) or the ephemeral path -> fanout hub.
struct committed_events {
  std::vector<ingest_item> items;
};

// Connection actor -> hub; answered with hub_ack once the subscription is in
// the index, so that a history query issued afterwards cannot miss an event
// that the hub has not seen yet (see docs/architecture.md, REQ).
struct hub_subscribe {
  caf::actor conn;
  int64_t community_id = 0;
  std::string sub_id;
  uint64_t generation = 0;  // the connection's REQ number for this sub id
  std::vector<proto::filter> filters;
};

struct hub_ack {};

// Connection actor -> hub: an ephemeral event to fan out, answered with
// hub_ack once it has been handed to its subscribers. Until then it counts
// in the connection's events in flight, so a flood meets the same cap as
// stored events instead of going straight to the hub's mailbox.
struct ephemeral_publish {
  ingest_item item;
};

struct hub_unsubscribe {
  caf::actor conn;
  std::string sub_id;
};

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

// -- reads --------------------------------------------------------------------

// One channel a subscription may read, and on whose authority: `open` (any
// authenticated user) and/or the pubkeys that are members.
struct channel_grant {
  std::string channel;
  bool open = false;
  std::vector<std::string> members;
};

// Access to the community itself (docs/communities.md), on whose authority:
// the members among the reader's pubkeys, or, while the community is open,
// any of its pubkeys that is not banned (`guests`).
struct community_grant {
  // Set by the reader that checked it; a reply without it (a trace recorded
  // before communities had members) carries no community facts.
  bool checked = false;
  bool open = false;
  std::vector<std::string> members;
  std::vector<std::string> guests;
  bool allows() const { return !members.empty() || (open && !guests.empty()); }
};

// The channels a read names in `#h` and the pubkeys the reader proved: the
// reader session re-checks access (proto::nip29::may_read) before it reads.
struct read_access {
  std::vector<std::string> channels;
  std::vector<std::string> pubkeys;
};

struct history_request {
  int64_t community_id = 0;
  std::vector<proto::filter> filters;
  read_access access;
  history_page page;
  // The steady-clock time (ns since its epoch) of the requester's last
  // acknowledged write, 0 = none: a bounded replica read must be proved at
  // or after it (docs/replicas.md, read-your-writes).
  int64_t read_after_ns = 0;
};

struct history_reply {
  std::vector<std::string> raws;  // newest first
  status err;
  // The access re-check's grants (one per channel of the request's access),
  // so the subscription drops any authority lost before it was registered.
  std::vector<channel_grant> grants;
  community_grant community;
  // Set when the history goes on past `raws`: the request of its next page.
  bool more = false;
  history_page next;
};

struct count_request {
  int64_t community_id = 0;
  std::vector<proto::filter> filters;
  read_access access;
  int64_t read_after_ns = 0;  // as in history_request
};

// Connection actor -> reader: may these pubkeys read these channels? Asked
// before a REQ naming channels is registered with the hub.
struct access_request {
  int64_t community_id = 0;
  read_access access;
};

struct access_reply {
  std::vector<channel_grant> grants;  // one per channel asked, when err is ok
  status err;                         // ec::restricted names the first refused channel
  community_grant community;          // when err is ok
};

// -- channels (NIP-29) --------------------------------------------------------

// Connection actor / HTTP submit -> group actor: a NIP-29 command event.
// Answered like ingest, after COMMIT.
struct group_request {
  int64_t community_id = 0;
  event_ptr ev;
};

// Group actor -> group session.
struct group_command_request {
  int64_t community_id = 0;
  event_ptr ev;
};

struct group_command_reply {
  write_result result;
  group_change change;
};

// Roster actor -> group session: publish 39000/39001/39002 now. `now` comes
// from the roster actor's node_env (so a replay signs the same created_at).
struct roster_publish_request {
  int64_t community_id = 0;
  std::string channel;
  int64_t now = 0;
};

struct roster_publish_reply {
  std::vector<event_ptr> events;  // stored by this publication
  status err;
};

// Group actor -> roster actor: the channel changed; publish (again).
// `retry` marks the roster actor's own retry after a failed publication (a
// timer, recorded as such in traces).
struct roster_dirty {
  bool retry = false;
};

// A roster actor's idle timer (roster actor -> itself): `generation` is the
// number of changes it had taken when it armed it, so a change since makes
// the tick stale.
struct roster_idle_tick {
  uint64_t generation = 0;
};

// Roster actor -> group actor: idle since it took `generation` changes; the
// group actor stops it (roster_stop) if it has sent no change since.
struct roster_idle {
  int64_t community_id = 0;
  std::string channel;
  uint64_t generation = 0;
};

// Group actor -> an idle roster actor: quit. The next change spawns a new
// one, which captures the roster from the database like any publication.
struct roster_stop {};

// Start-up (node) -> group actor -> group session: republish every stored
// 39002 that differs from channel_members (db::stale_rosters).
struct roster_repair_request {
  int64_t now = 0;
};

struct roster_repair_reply {
  uint64_t repaired = 0;
  std::vector<ingest_item> events;
  status err;
};

// Start-up (node) -> ingest (every writer) and the group actor (its session):
// is the roster fence in place and working on this connection?
struct fence_probe_request {};

struct fence_probe_reply {
  status err;
};

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

// Community watcher -> hub -> connection actors: access to the community
// ended for `pubkey` (removed or banned); with `pubkey` empty, the community
// stopped being open (every grant that rested on that ends).
struct access_revoked {
  int64_t community_id = 0;
  std::string pubkey;
};

// -- communities (NIP-43) -----------------------------------------------------

// Connection actor / HTTP submit -> membership actor: a join (28934) or
// leave (28936) request. Answered after COMMIT with the OK to send.
struct membership_request {
  int64_t community_id = 0;
  event_ptr ev;
};
struct membership_reply {
  bool accepted = false;
  std::string message;  // OK's message, e.g. "claim-accepted: welcome"
};
// Connection actor -> membership actor: a REQ asked for kind 28935.
struct invite_request {
  int64_t community_id = 0;
  std::vector<std::string> pubkeys;  // proven on the connection
};
struct invite_reply {
  event_ptr invite;  // relay-signed 28935 with a fresh claim code; never stored
  status err;
};
// -> community watcher: changes were committed, look now (else: its timer).
struct access_poke {};
struct watch_tick {};

// TTL reaper timer, and what it archived (-> group actor, to republish 39000).
struct reap_tick {};

// Ingest's commit-delay timer (ingest -> itself): a held batch may go now.
struct ingest_tick {};

struct channels_archived {
  std::vector<channel_ref> channels;
};

struct count_reply {
  uint64_t count = 0;
  status err;
};

// -- HTTP submit (POST /events) ----------------------------------------------

// Node -> HTTP submit actor: the request as the gateway took it. Its NIP-98
// Authorization is verified on the actor, never on an io thread; the header
// is not recorded in traces (only the pubkey it proves, as http_event_in).
struct http_request_in {
  std::string authorization;
  std::string host;    // the Host header, as sent
  std::string target;  // path and query
  std::string body;
};

// The event NIP-98 let in: what a trace records and a replay sends.
struct http_event_in {
  std::string auth_pubkey;
  std::string text;
};

// -- NIP-86 management (docs/management.md) -----------------------------------

// Node's per-request actor -> management actor: a JSON-RPC call whose NIP-98
// signature checked; `caller` is the key it proved.
struct manage_request {
  int64_t community_id = 0;
  std::string caller;
  std::string body;
};

// The HTTP answer: 200 with {"result"} or {"error"}, 400 for malformed
// JSON-RPC, 403 for a caller who may not manage the community.
struct manage_reply {
  uint16_t http_status = 200;
  std::string body;
  // A key the call took out of the community, committed: whoever answers the
  // caller first ends that key's subscriptions (access_revoked to the hub).
  std::string revoked;
};

// -- reads: withdrawal (docs/architecture.md, "reader pool") ------------------

// Connection actor -> reader pool: its reads whose caller gave up (the
// subscription was closed or replaced, or the socket went away). `requests`
// are the request ids of the connection's own `request(...)` calls
// (caf::message_id::request_id, as the pool sees them); `all` withdraws every
// read of the sender. Reads still queued are dropped, never answered (nobody
// waits: the requester's own timeout clears its handler); one already
// running is not interrupted (statement_timeout ends it).
struct read_withdraw {
  std::vector<uint64_t> requests;
  bool all = false;
};

// Reader pool -> reader session, once at start: "you are my session
// `index`". The session then sends `reader_idle` back after every read, which
// is how the pool knows it may hand it the next one (sessions answer the
// connection directly, as delegated, so the pool never sees the reply).
struct reader_attach {
  uint64_t index = 0;
};
struct reader_idle {
  uint64_t index = 0;
};

// -- write policy (docs/write-policy.md) --------------------------------------

// Connection actor / HTTP submit -> write-policy plugin actor: judge this
// admitted event before it goes anywhere. `ip` is the client's address
// ("" if unknown); `received_at` the connection's clock reading (unix s).
struct policy_request {
  event_ptr ev;
  int64_t received_at = 0;
  std::string ip;
};

// The plugin's verdict, or the fail mode's when it could not give one (a
// closed fail mode rejects with "blocked: write policy unavailable").
struct policy_verdict {
  policy_action action = policy_action::reject;
  std::string msg;
};

// The fail mode's verdict (`--write-policy-fail closed|open`).
inline policy_verdict unavailable_verdict(bool fail_open) {
  if (fail_open)
    return {policy_action::accept, ""};
  return {policy_action::reject, "blocked: write policy unavailable"};
}

// The plugin process's reader thread -> the plugin actor: one line of its
// stdout (an answer) or stderr (logged). `generation` names the child, so a
// line of a child that was already replaced is ignored.
struct policy_output {
  uint64_t generation = 0;
  bool is_stderr = false;
  std::string line;
};

// Reader thread -> plugin actor: the child's stdout ended (it exited or
// closed it): it is killed, reaped and restarted.
struct policy_child_gone {
  uint64_t generation = 0;
};

// Plugin actor -> itself: check deadlines and retry pending stdin writes.
struct policy_tick {};

// Plugin actor -> itself, after the restart backoff: start a new child.
struct policy_restart {};

// -- node ---------------------------------------------------------------------

// Node -> connection actors on SIGTERM: answer what is in flight, then close 1001.
struct drain_request {};

// Directory/health timer tick (a typed input so traces can record it).
struct refresh_tick {};

// Expiration reaper timer (NIP-40): delete the events that have expired.
struct expiry_tick {};

// The heartbeat prober's timer (docs/replicas.md).
struct heartbeat_tick {};

// Node supervisor -> itself: restart a child after its backoff.
struct restart_child {
  uint8_t which = 0;
};

// -- inspect ------------------------------------------------------------------

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, socket_frame& x) {
  return f(caf::meta::type_name("socket_frame"), x.text);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, socket_closed&) {
  return f(caf::meta::type_name("socket_closed"));
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, socket_drained& x) {
  return f(caf::meta::type_name("socket_drained"), x.frames, x.bytes);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, ingest_request& x) {
  return f(caf::meta::type_name("ingest_request"), x.community_id, x.ev);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, ingest_reply& x) {
  return f(caf::meta::type_name("ingest_reply"), x.outcome, x.reason);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, write_batch_request& x) {
  return f(caf::meta::type_name("write_batch_request"), x.items, x.push_gate_all, x.push_gated,
           x.lease, x.push_skipped);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, write_batch_reply& x) {
  return f(caf::meta::type_name("write_batch_reply"), x.results, x.commit_seconds);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, committed_events& x) {
  return f(caf::meta::type_name("committed_events"), x.items);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, hub_subscribe& x) {
  return f(caf::meta::type_name("hub_subscribe"), x.conn, x.community_id, x.sub_id, x.generation,
           x.filters);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, hub_ack&) {
  return f(caf::meta::type_name("hub_ack"));
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, ephemeral_publish& x) {
  return f(caf::meta::type_name("ephemeral_publish"), x.item);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, hub_unsubscribe& x) {
  return f(caf::meta::type_name("hub_unsubscribe"), x.conn, x.sub_id);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, live_event& x) {
  return f(caf::meta::type_name("live_event"), x.ev, x.sub_ids, x.generations);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, read_access& x) {
  return f(caf::meta::type_name("read_access"), x.channels, x.pubkeys);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, history_page& x) {
  return f(caf::meta::type_name("history_page"), x.rows, x.started, x.horizon_created_at,
           x.horizon_id, x.remaining);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, history_request& x) {
  return f(caf::meta::type_name("history_request"), x.community_id, x.filters, x.access, x.page,
           x.read_after_ns);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, history_reply& x) {
  return f(caf::meta::type_name("history_reply"), x.raws, x.err, x.grants, x.community, x.more,
           x.next);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, count_request& x) {
  return f(caf::meta::type_name("count_request"), x.community_id, x.filters, x.access,
           x.read_after_ns);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, access_request& x) {
  return f(caf::meta::type_name("access_request"), x.community_id, x.access);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, channel_grant& x) {
  return f(caf::meta::type_name("channel_grant"), x.channel, x.open, x.members);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, community_grant& x) {
  return f(caf::meta::type_name("community_grant"), x.checked, x.open, x.members, x.guests);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, access_reply& x) {
  return f(caf::meta::type_name("access_reply"), x.grants, x.err, x.community);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, access_revoked& x) {
  return f(caf::meta::type_name("access_revoked"), x.community_id, x.pubkey);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, membership_request& x) {
  return f(caf::meta::type_name("membership_request"), x.community_id, x.ev);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, membership_reply& x) {
  return f(caf::meta::type_name("membership_reply"), x.accepted, x.message);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, invite_request& x) {
  return f(caf::meta::type_name("invite_request"), x.community_id, x.pubkeys);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, invite_reply& x) {
  return f(caf::meta::type_name("invite_reply"), x.invite, x.err);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, access_poke&) {
  return f(caf::meta::type_name("access_poke"));
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, watch_tick&) {
  return f(caf::meta::type_name("watch_tick"));
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, group_request& x) {
  return f(caf::meta::type_name("group_request"), x.community_id, x.ev);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, group_command_request& x) {
  return f(caf::meta::type_name("group_command_request"), x.community_id, x.ev);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, group_command_reply& x) {
  return f(caf::meta::type_name("group_command_reply"), x.result, x.change);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, roster_publish_request& x) {
  return f(caf::meta::type_name("roster_publish_request"), x.community_id, x.channel, x.now);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, roster_publish_reply& x) {
  return f(caf::meta::type_name("roster_publish_reply"), x.events, x.err);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, roster_dirty& x) {
  return f(caf::meta::type_name("roster_dirty"), x.retry);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, roster_repair_request& x) {
  return f(caf::meta::type_name("roster_repair_request"), x.now);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, roster_repair_reply& x) {
  return f(caf::meta::type_name("roster_repair_reply"), x.repaired, x.events, x.err);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, fence_probe_request&) {
  return f(caf::meta::type_name("fence_probe_request"));
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, fence_probe_reply& x) {
  return f(caf::meta::type_name("fence_probe_reply"), x.err);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, channel_revoked& x) {
  return f(caf::meta::type_name("channel_revoked"), x.community_id, x.channel, x.pubkey,
           x.deleted);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, history_stall_check&) {
  return f(caf::meta::type_name("history_stall_check"));
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, roster_idle_tick& x) {
  return f(caf::meta::type_name("roster_idle_tick"), x.generation);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, roster_idle& x) {
  return f(caf::meta::type_name("roster_idle"), x.community_id, x.channel, x.generation);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, roster_stop&) {
  return f(caf::meta::type_name("roster_stop"));
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, reap_tick&) {
  return f(caf::meta::type_name("reap_tick"));
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, ingest_tick&) {
  return f(caf::meta::type_name("ingest_tick"));
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, channels_archived& x) {
  return f(caf::meta::type_name("channels_archived"), x.channels);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, count_reply& x) {
  return f(caf::meta::type_name("count_reply"), x.count, x.err);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, drain_request&) {
  return f(caf::meta::type_name("drain_request"));
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, refresh_tick&) {
  return f(caf::meta::type_name("refresh_tick"));
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, expiry_tick&) {
  return f(caf::meta::type_name("expiry_tick"));
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, heartbeat_tick&) {
  return f(caf::meta::type_name("heartbeat_tick"));
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, restart_child& x) {
  return f(caf::meta::type_name("restart_child"), x.which);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, http_request_in& x) {
  return f(caf::meta::type_name("http_request_in"), x.authorization, x.host, x.target, x.body);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, http_event_in& x) {
  return f(caf::meta::type_name("http_event_in"), x.auth_pubkey, x.text);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, policy_request& x) {
  return f(caf::meta::type_name("policy_request"), x.ev, x.received_at, x.ip);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, policy_verdict& x) {
  return f(caf::meta::type_name("policy_verdict"), x.action, x.msg);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, policy_output& x) {
  return f(caf::meta::type_name("policy_output"), x.generation, x.is_stderr, x.line);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, policy_child_gone& x) {
  return f(caf::meta::type_name("policy_child_gone"), x.generation);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, policy_tick&) {
  return f(caf::meta::type_name("policy_tick"));
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, policy_restart&) {
  return f(caf::meta::type_name("policy_restart"));
}

// Registers the block with a config; call before constructing actor_system.
void register_types(caf::actor_system_config& cfg);

}  // namespace waggle

// Value types from the pure layers: inspected by value (events and filters as
// their canonical JSON, which is what a trace reader wants to see).
namespace waggle {
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, status& x) {
  return f(caf::meta::type_name("status"), x.code, x.reason);
}
}  // namespace waggle

namespace waggle::proto {
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, std::shared_ptr<const event>& x) {
  std::string json;
  if constexpr (Inspector::reads_state) {
    if (x)
      json = x->raw;
    return f(json);
  } else {
    auto err = f(json);
    if (auto parsed = parse_event(json))
      x = std::make_shared<const event>(std::move(*parsed));
    else
      x = nullptr;
    return err;
  }
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, filter& x) {
  std::string json;
  if constexpr (Inspector::reads_state) {
    json = to_json(x);
    return f(json);
  } else {
    auto err = f(json);
    if (auto parsed = parse_filter(json, filter_limits{}))
      x = std::move(*parsed);
    return err;
  }
}
}  // namespace waggle::proto

namespace waggle {
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, ingest_item& x) {
  return f(caf::meta::type_name("ingest_item"), x.community_id, x.ev);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, write_result& x) {
  return f(caf::meta::type_name("write_result"), x.outcome, x.reason);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, group_change& x) {
  return f(caf::meta::type_name("group_change"), x.channel, x.roster_changed,
           x.metadata_changed, x.deleted, x.became_private, x.removed);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, channel_ref& x) {
  return f(caf::meta::type_name("channel_ref"), x.community_id, x.channel);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, manage_request& x) {
  return f(caf::meta::type_name("manage_request"), x.community_id, x.caller, x.body);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, manage_reply& x) {
  return f(caf::meta::type_name("manage_reply"), x.http_status, x.body, x.revoked);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, read_withdraw& x) {
  return f(caf::meta::type_name("read_withdraw"), x.requests, x.all);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, reader_attach& x) {
  return f(caf::meta::type_name("reader_attach"), x.index);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, reader_idle& x) {
  return f(caf::meta::type_name("reader_idle"), x.index);
}
}  // namespace waggle

CAF_BEGIN_TYPE_ID_BLOCK(waggle, caf::first_custom_type_id)
  CAF_ADD_TYPE_ID(waggle, (waggle::socket_frame))
  CAF_ADD_TYPE_ID(waggle, (waggle::socket_closed))
  CAF_ADD_TYPE_ID(waggle, (waggle::ingest_request))
  CAF_ADD_TYPE_ID(waggle, (waggle::ingest_reply))
  CAF_ADD_TYPE_ID(waggle, (waggle::write_batch_request))
  CAF_ADD_TYPE_ID(waggle, (waggle::write_batch_reply))
  CAF_ADD_TYPE_ID(waggle, (waggle::committed_events))
  CAF_ADD_TYPE_ID(waggle, (waggle::hub_subscribe))
  CAF_ADD_TYPE_ID(waggle, (waggle::hub_ack))
  CAF_ADD_TYPE_ID(waggle, (waggle::hub_unsubscribe))
  CAF_ADD_TYPE_ID(waggle, (waggle::live_event))
  CAF_ADD_TYPE_ID(waggle, (waggle::history_request))
  CAF_ADD_TYPE_ID(waggle, (waggle::history_page))
  CAF_ADD_TYPE_ID(waggle, (waggle::history_reply))
  CAF_ADD_TYPE_ID(waggle, (waggle::count_request))
  CAF_ADD_TYPE_ID(waggle, (waggle::count_reply))
  CAF_ADD_TYPE_ID(waggle, (waggle::drain_request))
  CAF_ADD_TYPE_ID(waggle, (waggle::refresh_tick))
  CAF_ADD_TYPE_ID(waggle, (waggle::restart_child))
  CAF_ADD_TYPE_ID(waggle, (waggle::read_access))
  CAF_ADD_TYPE_ID(waggle, (waggle::access_request))
  CAF_ADD_TYPE_ID(waggle, (waggle::channel_grant))
  CAF_ADD_TYPE_ID(waggle, (waggle::access_reply))
  CAF_ADD_TYPE_ID(waggle, (waggle::group_request))
  CAF_ADD_TYPE_ID(waggle, (waggle::group_command_request))
  CAF_ADD_TYPE_ID(waggle, (waggle::group_command_reply))
  CAF_ADD_TYPE_ID(waggle, (waggle::roster_publish_request))
  CAF_ADD_TYPE_ID(waggle, (waggle::roster_publish_reply))
  CAF_ADD_TYPE_ID(waggle, (waggle::roster_dirty))
  CAF_ADD_TYPE_ID(waggle, (waggle::roster_repair_request))
  CAF_ADD_TYPE_ID(waggle, (waggle::roster_repair_reply))
  CAF_ADD_TYPE_ID(waggle, (waggle::fence_probe_request))
  CAF_ADD_TYPE_ID(waggle, (waggle::fence_probe_reply))
  CAF_ADD_TYPE_ID(waggle, (waggle::channel_revoked))
  CAF_ADD_TYPE_ID(waggle, (waggle::reap_tick))
  CAF_ADD_TYPE_ID(waggle, (waggle::channels_archived))
  CAF_ADD_TYPE_ID(waggle, (waggle::ingest_tick))
  CAF_ADD_TYPE_ID(waggle, (waggle::http_request_in))
  CAF_ADD_TYPE_ID(waggle, (waggle::http_event_in))
  CAF_ADD_TYPE_ID(waggle, (waggle::community_grant))
  CAF_ADD_TYPE_ID(waggle, (waggle::access_revoked))
  CAF_ADD_TYPE_ID(waggle, (waggle::membership_request))
  CAF_ADD_TYPE_ID(waggle, (waggle::membership_reply))
  CAF_ADD_TYPE_ID(waggle, (waggle::invite_request))
  CAF_ADD_TYPE_ID(waggle, (waggle::invite_reply))
  CAF_ADD_TYPE_ID(waggle, (waggle::access_poke))
  CAF_ADD_TYPE_ID(waggle, (waggle::watch_tick))
  CAF_ADD_TYPE_ID(waggle, (waggle::expiry_tick))
  CAF_ADD_TYPE_ID(waggle, (waggle::policy_request))
  CAF_ADD_TYPE_ID(waggle, (waggle::policy_verdict))
  CAF_ADD_TYPE_ID(waggle, (waggle::policy_output))
  CAF_ADD_TYPE_ID(waggle, (waggle::policy_child_gone))
  CAF_ADD_TYPE_ID(waggle, (waggle::policy_tick))
  CAF_ADD_TYPE_ID(waggle, (waggle::policy_restart))
  CAF_ADD_TYPE_ID(waggle, (waggle::manage_request))
  CAF_ADD_TYPE_ID(waggle, (waggle::manage_reply))
  CAF_ADD_TYPE_ID(waggle, (waggle::socket_drained))
  CAF_ADD_TYPE_ID(waggle, (waggle::roster_idle_tick))
  CAF_ADD_TYPE_ID(waggle, (waggle::roster_idle))
  CAF_ADD_TYPE_ID(waggle, (waggle::roster_stop))
  CAF_ADD_TYPE_ID(waggle, (waggle::ephemeral_publish))
  CAF_ADD_TYPE_ID(waggle, (waggle::read_withdraw))
  CAF_ADD_TYPE_ID(waggle, (waggle::reader_attach))
  CAF_ADD_TYPE_ID(waggle, (waggle::reader_idle))
  CAF_ADD_TYPE_ID(waggle, (waggle::history_stall_check))
  CAF_ADD_TYPE_ID(waggle, (waggle::delivery_job))
  CAF_ADD_TYPE_ID(waggle, (waggle::delivery_response))
  CAF_ADD_TYPE_ID(waggle, (waggle::delivery_claim_request))
  CAF_ADD_TYPE_ID(waggle, (waggle::delivery_claim_reply))
  CAF_ADD_TYPE_ID(waggle, (waggle::delivery_complete_request))
  CAF_ADD_TYPE_ID(waggle, (waggle::delivery_complete_reply))
  CAF_ADD_TYPE_ID(waggle, (waggle::delivery_attempt))
  CAF_ADD_TYPE_ID(waggle, (waggle::delivery_response_in))
  CAF_ADD_TYPE_ID(waggle, (waggle::delivery_done))
  CAF_ADD_TYPE_ID(waggle, (waggle::delivery_wake))
  CAF_ADD_TYPE_ID(waggle, (waggle::listener_health))
  CAF_ADD_TYPE_ID(waggle, (waggle::delivery_tick))
  CAF_ADD_TYPE_ID(waggle, (waggle::listen_tick))
  CAF_ADD_TYPE_ID(waggle, (waggle::listener_registration_request))
  CAF_ADD_TYPE_ID(waggle, (waggle::listener_registration_reply))
  CAF_ADD_TYPE_ID(waggle, (waggle::listener_reap_tick))
  CAF_ADD_TYPE_ID(waggle, (waggle::push_gate_loaded))
  CAF_ADD_TYPE_ID(waggle, (waggle::push_match_wake))
  CAF_ADD_TYPE_ID(waggle, (waggle::push_match_tick))
  CAF_ADD_TYPE_ID(waggle, (waggle::push_sweep_tick))
  CAF_ADD_TYPE_ID(waggle, (waggle::push_match_record))
  CAF_ADD_TYPE_ID(waggle, (waggle::delivery_ready))
  CAF_ADD_TYPE_ID(waggle, (waggle::delivery_complete_batch))
  CAF_ADD_TYPE_ID(waggle, (waggle::delivery_complete_batch_reply))
  CAF_ADD_TYPE_ID(waggle, (waggle::delivery_flush))
  CAF_ADD_TYPE_ID(waggle, (waggle::heartbeat_tick))
  CAF_ADD_TYPE_ID(waggle, (waggle::manage_call_in))
  CAF_ADD_TYPE_ID(waggle, (waggle::listener_call_in))
CAF_END_TYPE_ID_BLOCK(waggle)
