#pragma once

// The one CAF type-ID block of the node: every message type, numbered from
// caf::first_custom_type_id in the order listed. The order is the numbering,
// which recorded traces and other nodes rely on: a new type goes at the end,
// and no entry ever moves. So the entries are not grouped by domain; a banner
// names the header of the entries below it wherever the domain changes.

#include <caf/type_id.hpp>

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
#include "messages/value_inspect.hpp"

CAF_BEGIN_TYPE_ID_BLOCK(waggle, caf::first_custom_type_id)
  // -- socket ------------------------------------------------------------------
  CAF_ADD_TYPE_ID(waggle, (waggle::socket_frame))
  CAF_ADD_TYPE_ID(waggle, (waggle::socket_closed))
  // -- ingest ------------------------------------------------------------------
  CAF_ADD_TYPE_ID(waggle, (waggle::ingest_request))
  CAF_ADD_TYPE_ID(waggle, (waggle::ingest_reply))
  CAF_ADD_TYPE_ID(waggle, (waggle::write_batch_request))
  CAF_ADD_TYPE_ID(waggle, (waggle::write_batch_reply))
  // -- fanout ------------------------------------------------------------------
  CAF_ADD_TYPE_ID(waggle, (waggle::committed_events))
  CAF_ADD_TYPE_ID(waggle, (waggle::hub_subscribe))
  CAF_ADD_TYPE_ID(waggle, (waggle::hub_ack))
  CAF_ADD_TYPE_ID(waggle, (waggle::hub_unsubscribe))
  CAF_ADD_TYPE_ID(waggle, (waggle::live_event))
  // -- reads (history_page: value_inspect.hpp) ----------------------------------
  CAF_ADD_TYPE_ID(waggle, (waggle::history_request))
  CAF_ADD_TYPE_ID(waggle, (waggle::history_page))
  CAF_ADD_TYPE_ID(waggle, (waggle::history_reply))
  CAF_ADD_TYPE_ID(waggle, (waggle::count_request))
  CAF_ADD_TYPE_ID(waggle, (waggle::count_reply))
  // -- node --------------------------------------------------------------------
  CAF_ADD_TYPE_ID(waggle, (waggle::drain_request))
  CAF_ADD_TYPE_ID(waggle, (waggle::refresh_tick))
  CAF_ADD_TYPE_ID(waggle, (waggle::restart_child))
  // -- reads -------------------------------------------------------------------
  CAF_ADD_TYPE_ID(waggle, (waggle::read_access))
  CAF_ADD_TYPE_ID(waggle, (waggle::access_request))
  CAF_ADD_TYPE_ID(waggle, (waggle::channel_grant))
  CAF_ADD_TYPE_ID(waggle, (waggle::access_reply))
  // -- channels ----------------------------------------------------------------
  CAF_ADD_TYPE_ID(waggle, (waggle::group_request))
  CAF_ADD_TYPE_ID(waggle, (waggle::group_command_request))
  CAF_ADD_TYPE_ID(waggle, (waggle::group_command_reply))
  CAF_ADD_TYPE_ID(waggle, (waggle::roster_publish_request))
  CAF_ADD_TYPE_ID(waggle, (waggle::roster_publish_reply))
  CAF_ADD_TYPE_ID(waggle, (waggle::roster_dirty))
  CAF_ADD_TYPE_ID(waggle, (waggle::roster_repair_request))
  CAF_ADD_TYPE_ID(waggle, (waggle::roster_repair_reply))
  // -- ingest ------------------------------------------------------------------
  CAF_ADD_TYPE_ID(waggle, (waggle::fence_probe_request))
  CAF_ADD_TYPE_ID(waggle, (waggle::fence_probe_reply))
  // -- fanout ------------------------------------------------------------------
  CAF_ADD_TYPE_ID(waggle, (waggle::channel_revoked))
  // -- channels ----------------------------------------------------------------
  CAF_ADD_TYPE_ID(waggle, (waggle::reap_tick))
  CAF_ADD_TYPE_ID(waggle, (waggle::channels_archived))
  // -- ingest ------------------------------------------------------------------
  CAF_ADD_TYPE_ID(waggle, (waggle::ingest_tick))
  // -- socket ------------------------------------------------------------------
  CAF_ADD_TYPE_ID(waggle, (waggle::http_request_in))
  CAF_ADD_TYPE_ID(waggle, (waggle::http_event_in))
  // -- reads -------------------------------------------------------------------
  CAF_ADD_TYPE_ID(waggle, (waggle::community_grant))
  // -- fanout ------------------------------------------------------------------
  CAF_ADD_TYPE_ID(waggle, (waggle::access_revoked))
  // -- communities -------------------------------------------------------------
  CAF_ADD_TYPE_ID(waggle, (waggle::membership_request))
  CAF_ADD_TYPE_ID(waggle, (waggle::membership_reply))
  CAF_ADD_TYPE_ID(waggle, (waggle::invite_request))
  CAF_ADD_TYPE_ID(waggle, (waggle::invite_reply))
  CAF_ADD_TYPE_ID(waggle, (waggle::access_poke))
  CAF_ADD_TYPE_ID(waggle, (waggle::watch_tick))
  // -- node --------------------------------------------------------------------
  CAF_ADD_TYPE_ID(waggle, (waggle::expiry_tick))
  // -- policy ------------------------------------------------------------------
  CAF_ADD_TYPE_ID(waggle, (waggle::policy_request))
  CAF_ADD_TYPE_ID(waggle, (waggle::policy_verdict))
  CAF_ADD_TYPE_ID(waggle, (waggle::policy_output))
  CAF_ADD_TYPE_ID(waggle, (waggle::policy_child_gone))
  CAF_ADD_TYPE_ID(waggle, (waggle::policy_tick))
  CAF_ADD_TYPE_ID(waggle, (waggle::policy_restart))
  // -- communities -------------------------------------------------------------
  CAF_ADD_TYPE_ID(waggle, (waggle::manage_request))
  CAF_ADD_TYPE_ID(waggle, (waggle::manage_reply))
  // -- socket ------------------------------------------------------------------
  CAF_ADD_TYPE_ID(waggle, (waggle::socket_drained))
  // -- channels ----------------------------------------------------------------
  CAF_ADD_TYPE_ID(waggle, (waggle::roster_idle_tick))
  CAF_ADD_TYPE_ID(waggle, (waggle::roster_idle))
  CAF_ADD_TYPE_ID(waggle, (waggle::roster_stop))
  // -- fanout ------------------------------------------------------------------
  CAF_ADD_TYPE_ID(waggle, (waggle::ephemeral_publish))
  // -- reads -------------------------------------------------------------------
  CAF_ADD_TYPE_ID(waggle, (waggle::read_withdraw))
  CAF_ADD_TYPE_ID(waggle, (waggle::reader_attach))
  CAF_ADD_TYPE_ID(waggle, (waggle::reader_idle))
  // -- socket ------------------------------------------------------------------
  CAF_ADD_TYPE_ID(waggle, (waggle::history_stall_check))
  // -- delivery ----------------------------------------------------------------
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
  // -- push --------------------------------------------------------------------
  CAF_ADD_TYPE_ID(waggle, (waggle::push_gate_loaded))
  CAF_ADD_TYPE_ID(waggle, (waggle::push_match_wake))
  CAF_ADD_TYPE_ID(waggle, (waggle::push_match_tick))
  CAF_ADD_TYPE_ID(waggle, (waggle::push_sweep_tick))
  CAF_ADD_TYPE_ID(waggle, (waggle::push_match_record))
  CAF_ADD_TYPE_ID(waggle, (waggle::delivery_ready))
  // -- delivery ----------------------------------------------------------------
  CAF_ADD_TYPE_ID(waggle, (waggle::delivery_complete_batch))
  CAF_ADD_TYPE_ID(waggle, (waggle::delivery_complete_batch_reply))
  CAF_ADD_TYPE_ID(waggle, (waggle::delivery_flush))
  // -- node --------------------------------------------------------------------
  CAF_ADD_TYPE_ID(waggle, (waggle::heartbeat_tick))
  // -- http api (actors/node/http_api_actor) -------------------------------------
  CAF_ADD_TYPE_ID(waggle, (waggle::manage_call_in))
  CAF_ADD_TYPE_ID(waggle, (waggle::listener_call_in))
  CAF_ADD_TYPE_ID(waggle, (waggle::cluster_call_in))
  // -- bus (messages/bus.hpp) ----------------------------------------------------
  CAF_ADD_TYPE_ID(waggle, (waggle::bus_message))
  CAF_ADD_TYPE_ID(waggle, (waggle::bus_lagged))
  CAF_ADD_TYPE_ID(waggle, (waggle::bus_publish))
  CAF_ADD_TYPE_ID(waggle, (waggle::bus_ack))
  CAF_ADD_TYPE_ID(waggle, (waggle::bus_subscribe))
  CAF_ADD_TYPE_ID(waggle, (waggle::bus_subscription))
  CAF_ADD_TYPE_ID(waggle, (waggle::bus_unsubscribe))
  CAF_ADD_TYPE_ID(waggle, (waggle::bus_request))
  CAF_ADD_TYPE_ID(waggle, (waggle::bus_request_expired))
  CAF_ADD_TYPE_ID(waggle, (waggle::bus_outgoing))
  CAF_ADD_TYPE_ID(waggle, (waggle::bus_store_batch))
  CAF_ADD_TYPE_ID(waggle, (waggle::bus_batch_stored))
  CAF_ADD_TYPE_ID(waggle, (waggle::bus_shards))
  CAF_ADD_TYPE_ID(waggle, (waggle::bus_watch))
  CAF_ADD_TYPE_ID(waggle, (waggle::bus_fetched))
  CAF_ADD_TYPE_ID(waggle, (waggle::bus_tick))
  CAF_ADD_TYPE_ID(waggle, (waggle::bus_listening))
  CAF_ADD_TYPE_ID(waggle, (waggle::bus_peer_info))
  CAF_ADD_TYPE_ID(waggle, (waggle::bus_peers))
  CAF_ADD_TYPE_ID(waggle, (waggle::bus_peer_frame))
  CAF_ADD_TYPE_ID(waggle, (waggle::bus_peer_forward))
  // -- bus probe (messages/bus_probe.hpp) ----------------------------------------
  CAF_ADD_TYPE_ID(waggle, (waggle::bus_probe_tick))
  CAF_ADD_TYPE_ID(waggle, (waggle::bus_probe_deadline))
  // -- bus, NATS driver (messages/bus.hpp) ---------------------------------------
  CAF_ADD_TYPE_ID(waggle, (waggle::nats_delivery))
  CAF_ADD_TYPE_ID(waggle, (waggle::nats_link_event))
  // -- cluster (messages/cluster.hpp) --------------------------------------------
  CAF_ADD_TYPE_ID(waggle, (waggle::cluster_local_commit))
  CAF_ADD_TYPE_ID(waggle, (waggle::cluster_local_ephemeral))
  CAF_ADD_TYPE_ID(waggle, (waggle::cluster_relay_tick))
  CAF_ADD_TYPE_ID(waggle, (waggle::cluster_attach))
  CAF_ADD_TYPE_ID(waggle, (waggle::cluster_committed))
  CAF_ADD_TYPE_ID(waggle, (waggle::cluster_ephemeral))
  CAF_ADD_TYPE_ID(waggle, (waggle::cluster_ring))
  CAF_ADD_TYPE_ID(waggle, (waggle::cluster_tail_tick))
  CAF_ADD_TYPE_ID(waggle, (waggle::cluster_barrier))
  CAF_ADD_TYPE_ID(waggle, (waggle::cluster_barrier_done))
  CAF_ADD_TYPE_ID(waggle, (waggle::cluster_sync))
  CAF_ADD_TYPE_ID(waggle, (waggle::cluster_synced))
  CAF_ADD_TYPE_ID(waggle, (waggle::cluster_read_now))
  CAF_ADD_TYPE_ID(waggle, (waggle::cluster_read_done))
  CAF_ADD_TYPE_ID(waggle, (waggle::cluster_nodes_request))
  CAF_ADD_TYPE_ID(waggle, (waggle::cluster_nodes))
  // -- the push gate across nodes (messages/push_cluster.hpp) ------------------------
  CAF_ADD_TYPE_ID(waggle, (waggle::cluster_gate_request))
  CAF_ADD_TYPE_ID(waggle, (waggle::cluster_gate_done))
  CAF_ADD_TYPE_ID(waggle, (waggle::push_gate_remote))
  CAF_ADD_TYPE_ID(waggle, (waggle::push_gate_drained))
  CAF_ADD_TYPE_ID(waggle, (waggle::cluster_gate_loaded))
  CAF_ADD_TYPE_ID(waggle, (waggle::push_gate_relay_tick))
  CAF_ADD_TYPE_ID(waggle, (waggle::push_gate_attach))
  // -- cluster control (messages/cluster.hpp, messages/fanout.hpp) -----------------
  CAF_ADD_TYPE_ID(waggle, (waggle::roster_route))
  CAF_ADD_TYPE_ID(waggle, (waggle::roster_routed))
  CAF_ADD_TYPE_ID(waggle, (waggle::roster_requested))
  CAF_ADD_TYPE_ID(waggle, (waggle::address_blocked))
  // -- NIP-77 items (messages/reads.hpp), last: numbers of older types unchanged --
  CAF_ADD_TYPE_ID(waggle, (waggle::sync_items_request))
  CAF_ADD_TYPE_ID(waggle, (waggle::sync_items_reply))
  // -- portability (messages/portability.hpp) ------------------------------------
  CAF_ADD_TYPE_ID(waggle, (waggle::load_next))
CAF_END_TYPE_ID_BLOCK(waggle)
