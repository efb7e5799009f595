#pragma once

// Typed interfaces of the node's actors. A handler's signature here is the
// whole contract between two actors; docs/architecture.md describes each.

#include <caf/replies_to.hpp>
#include <caf/stateful_actor.hpp>
#include <caf/typed_actor.hpp>
#include <caf/typed_event_based_actor.hpp>
#include <caf/typed_response_promise.hpp>

#include "messages/bus.hpp"
#include "messages/bus_probe.hpp"
#include "messages/channels.hpp"
#include "messages/cluster.hpp"
#include "messages/communities.hpp"
#include "messages/delivery.hpp"
#include "messages/fanout.hpp"
#include "messages/http_api.hpp"
#include "messages/ingest.hpp"
#include "messages/node.hpp"
#include "messages/policy.hpp"
#include "messages/portability.hpp"
#include "messages/push.hpp"
#include "messages/push_cluster.hpp"
#include "messages/reads.hpp"
#include "messages/socket.hpp"

namespace waggle {

// Ingest: the writer pool with group commit (docs/write-path.md).
using ingest_actor = caf::typed_actor<caf::replies_to<ingest_request>::with<ingest_reply>,
                                     caf::replies_to<fence_probe_request>::with<fence_probe_reply>,
                                     caf::reacts_to<ingest_tick>,
                                     caf::reacts_to<push_gate_loaded>,
                                     caf::reacts_to<push_gate_attach>,
                                     caf::reacts_to<cluster_gate_loaded>,
                                     caf::replies_to<push_gate_remote>::with<push_gate_drained>>;

// One writer session: owns one writer connection, runs one batch at a time.
using writer_session_actor
  = caf::typed_actor<caf::replies_to<write_batch_request>::with<write_batch_reply>,
                     caf::replies_to<fence_probe_request>::with<fence_probe_reply>>;

// Fanout hub: the local subscription index.
using hub_actor = caf::typed_actor<caf::reacts_to<committed_events>,
                                   caf::replies_to<hub_subscribe>::with<hub_ack>,
                                   caf::replies_to<ephemeral_publish>::with<hub_ack>,
                                   caf::reacts_to<cluster_committed>,
                                   caf::reacts_to<cluster_ephemeral>,
                                   caf::reacts_to<cluster_attach>,
                                   caf::replies_to<cluster_barrier>::with<cluster_barrier_done>,
                                   caf::replies_to<cluster_sync>::with<cluster_synced>,
                                   caf::replies_to<roster_route>::with<roster_routed>,
                                   caf::reacts_to<hub_unsubscribe>,
                                   caf::reacts_to<channel_revoked>,
                                   caf::reacts_to<access_revoked>>;

// Reads: history, counts and channel access. The pool and each of its
// sessions answer the same contract (connections talk to the pool); the pool
// also takes the withdrawal of reads whose caller gave up, and each session's
// word that it is idle.
using reader_actor = caf::typed_actor<caf::replies_to<history_request>::with<history_reply>,
                                      caf::replies_to<count_request>::with<count_reply>,
                                      caf::replies_to<sync_items_request>::with<sync_items_reply>,
                                      caf::replies_to<access_request>::with<access_reply>>;
using reader_pool_actor
  = reader_actor::extend<caf::reacts_to<read_withdraw>, caf::reacts_to<reader_idle>>;
using reader_session_actor = reader_actor::extend<caf::reacts_to<reader_attach>>;

// Group actor: NIP-29 commands, start-up fence probe and roster repair; its
// roster actors' publications (queued with the commands) and idle reports.
using group_actor
  = caf::typed_actor<caf::replies_to<group_request>::with<ingest_reply>,
                     caf::replies_to<fence_probe_request>::with<fence_probe_reply>,
                     caf::replies_to<roster_repair_request>::with<roster_repair_reply>,
                     caf::reacts_to<channels_archived>,
                     caf::replies_to<roster_publish_request>::with<roster_publish_reply>,
                     caf::reacts_to<roster_idle>,
                     caf::reacts_to<roster_requested>>;

// A group session: one of the group actor's writer connections (detached).
using group_session_actor
  = caf::typed_actor<caf::replies_to<group_command_request>::with<group_command_reply>,
                     caf::replies_to<roster_publish_request>::with<roster_publish_reply>,
                     caf::replies_to<roster_repair_request>::with<roster_repair_reply>,
                     caf::replies_to<fence_probe_request>::with<fence_probe_reply>>;

// Roster actor: one per channel with a recent change (stopped when idle).
using roster_actor = caf::typed_actor<caf::reacts_to<roster_dirty>, caf::reacts_to<roster_idle_tick>,
                                      caf::reacts_to<roster_stop>>;

// TTL reaper (detached, own connection).
using ttl_reaper_actor = caf::typed_actor<caf::reacts_to<reap_tick>>;

// Expiration reaper (detached, own connection): deletes expired events.
using expiration_reaper_actor = caf::typed_actor<caf::reacts_to<expiry_tick>>;

// Heartbeat prober (detached, its own pinned writer connection): commits the
// replica freshness proofs (docs/replicas.md).
using heartbeat_prober_actor = caf::typed_actor<caf::reacts_to<heartbeat_tick>>;

// Connection actor: one per socket. Its interface, `connection_actor`, is in
// messages/fanout.hpp, before hub_subscribe, which carries its handle.

// HTTP submit actor: one per POST /events, answers through its context's
// callback and quits.
using http_submit_actor
  = caf::typed_actor<caf::reacts_to<http_request_in>, caf::reacts_to<http_event_in>>;

// Load actor: one per event_loader::load (docs/portability.md); admits its
// events with the relay's rules, stores them through ingest and the group
// actor, answers through its context's callback and quits.
using load_actor = caf::typed_actor<caf::reacts_to<load_next>>;

// HTTP API actor: one per NIP-86 call or listener registration; checks its
// NIP-98 token, asks the management actor or the listener registry, answers
// through its context's callback and quits.
using http_api_actor = caf::typed_actor<caf::reacts_to<manage_call_in>,
                                        caf::reacts_to<listener_call_in>,
                                        caf::reacts_to<cluster_call_in>>;

// Management actor (detached, own connection): NIP-86 calls, one at a time.
using management_actor = caf::typed_actor<caf::replies_to<manage_request>::with<manage_reply>>;

// Membership actor (detached, own connection): NIP-43 join, leave and invite
// requests (docs/communities.md).
using membership_actor
  = caf::typed_actor<caf::replies_to<membership_request>::with<membership_reply>,
                     caf::replies_to<invite_request>::with<invite_reply>>;
// Community watcher (detached, own connection, LISTEN): publishes NIP-43
// state after each access change and sends the revocations to the hub.
using community_watcher_actor
  = caf::typed_actor<caf::reacts_to<access_poke>, caf::reacts_to<watch_tick>>;
// Write-policy plugin (detached): owns the strfry-style plugin process and
// answers each policy_request with a verdict (docs/write-policy.md).
using write_policy_actor
  = caf::typed_actor<caf::replies_to<policy_request>::with<policy_verdict>,
                     caf::reacts_to<policy_output>, caf::reacts_to<policy_child_gone>,
                     caf::reacts_to<policy_tick>, caf::reacts_to<policy_restart>>;

// Community directory (detached, own connection): refreshes the Host map.
// access_poke: a community's row changed (policy, NIP-11 text, blocked
// addresses): refresh now, outside the timer.
using community_directory_actor
  = caf::typed_actor<caf::reacts_to<refresh_tick>, caf::reacts_to<access_poke>>;

// -- delivery (docs/delivery.md) ------------------------------------------------

// The queue's store (detached, own connection): claims and fenced completions.
using delivery_store_actor
  = caf::typed_actor<caf::replies_to<delivery_claim_request>::with<delivery_claim_reply>,
                     caf::replies_to<delivery_complete_request>::with<delivery_complete_reply>,
                     caf::replies_to<delivery_complete_batch>::with<delivery_complete_batch_reply>>;
// The delivery supervisor: at most N slots in flight, woken on commit; takes
// jobs already claimed elsewhere (the push matcher's) as delivery_ready.
using delivery_supervisor_actor
  = caf::typed_actor<caf::reacts_to<delivery_wake>, caf::reacts_to<listener_health>,
                     caf::reacts_to<delivery_done>, caf::reacts_to<delivery_tick>,
                     caf::reacts_to<delivery_ready>, caf::reacts_to<delivery_flush>>;
// A delivery slot: one HTTP POST at a time.
using delivery_slot_actor
  = caf::typed_actor<caf::reacts_to<delivery_attempt>, caf::reacts_to<delivery_response_in>>;
// The listen actor (detached, its own LISTEN connection and a probe connection).
using listen_actor = caf::typed_actor<caf::reacts_to<listen_tick>>;
// The push matcher (detached, own connection): claims match jobs in batches.
using push_matcher_actor
  = caf::typed_actor<caf::reacts_to<push_match_wake>, caf::reacts_to<push_match_tick>,
                     caf::reacts_to<push_sweep_tick>, caf::reacts_to<listener_health>>;
// The listener registry (detached, own connection): registrations and reapers.
using listener_registry_actor
  = caf::typed_actor<caf::replies_to<listener_registration_request>::with<listener_registration_reply>,
                     caf::reacts_to<listener_reap_tick>>;

// Node supervisor: spawns, monitors and restarts the node's core actors.
using node_supervisor_actor = caf::typed_actor<caf::reacts_to<restart_child>>;

// The in-process bus driver (docs/bus.md): the bus interface, and the
// deadlines of its requests, which it sends itself.
using inproc_bus_actor = bus_actor::extend<caf::reacts_to<bus_request_expired>>;

// The PostgreSQL bus driver (docs/bus.md, "PostgreSQL"): the facade that
// answers the bus interface and delivers on this node, and its detached
// workers, each owning one connection.
using pg_bus_actor = bus_actor::extend<caf::reacts_to<bus_request_expired>,
                                       caf::reacts_to<bus_fetched>,
                                       caf::replies_to<bus_listening>::with<bus_shards>>;
using bus_publisher_actor
  = caf::typed_actor<caf::replies_to<bus_store_batch>::with<bus_batch_stored>>;
// Doorbell: takes dirty shards; its trailing edge is a bus_tick to itself.
using bus_doorbell_actor = caf::typed_actor<caf::reacts_to<bus_shards>, caf::reacts_to<bus_tick>>;
// Listener: takes the wanted shards; loops on bus_tick.
using bus_listener_actor = caf::typed_actor<caf::reacts_to<bus_shards>, caf::reacts_to<bus_tick>,
                                            caf::replies_to<bus_listening>::with<bus_shards>>;
// Fetcher: watches subjects, fetches shards when told (and on its poll).
using bus_fetcher_actor = caf::typed_actor<caf::replies_to<bus_watch>::with<bus_ack>,
                                           caf::reacts_to<bus_shards>, caf::reacts_to<bus_tick>,
                                           caf::replies_to<bus_listening>::with<bus_shards>>;
// Keeper: the node's registry row (heartbeat), node expiry, garbage collection.
using bus_keeper_actor = caf::typed_actor<caf::reacts_to<bus_tick>>;

// The CAF bus driver (docs/bus.md, "CAF"): the facade, published through
// the middleman so that peers connect to it, and its registry worker.
using caf_bus_actor = bus_actor::extend<caf::replies_to<bus_peer_frame>::with<bus_peer_frame>,
                                        caf::reacts_to<bus_peer_forward>,
                                        caf::reacts_to<bus_peers>,
                                        caf::reacts_to<bus_request_expired>>;
using caf_bus_registry_actor = caf::typed_actor<caf::reacts_to<bus_tick>>;

// The NATS bus driver (docs/bus.md, "NATS"): the facade; libnats's threads
// hand it what the server sends.
using nats_bus_actor = bus_actor::extend<caf::reacts_to<bus_request_expired>,
                                         caf::reacts_to<nats_delivery>,
                                         caf::reacts_to<nats_link_event>>;

// The node's presence on the bus (actors/bus/bus_probe.hpp): a subscriber
// that answers pings and times its own probes, on its two timers.
using bus_probe_actor = bus_subscriber_actor::extend<caf::reacts_to<bus_probe_tick>,
                                                     caf::reacts_to<bus_probe_deadline>>;

}  // namespace waggle
