#pragma once

// The connection actor: one per WebSocket. It owns the NIP-42 state and the
// subscriptions of its socket, parses and verifies frames (off the io
// threads), and is the only place where protocol text is rendered.

#include <cstdint>
#include <deque>
#include <functional>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "actors/connection/event_admission.hpp"
#include "actors/connection/policy_gate.hpp"
#include "actors/connection/history_queue.hpp"
#include "actors/connection/negentropy_sessions.hpp"
#include "actors/connection/subscription_memory.hpp"
#include "actors/connection/subscription_table.hpp"
#include "actors/connection/read_admission.hpp"
#include "actors/connection/refusal_pacer.hpp"
#include "actors/support/env.hpp"
#include "gateway/socket_sink.hpp"
#include "messages/interfaces.hpp"
#include "messages/proto/client_message.hpp"

namespace waggle {

struct connection_settings {
  int64_t community_id = 0;
  std::string relay_pubkey;  // signs NIP-29 group state; no one else may publish it
  std::string host;  // normalized Host of the upgrade request
  std::optional<uint16_t> host_port;  // the port the Host header named, if any (NIP-42)
  // The community's policy was `open` when the connection opened: a REQ
  // without channels and an ephemeral event outside channels need no access
  // check. Cleared by the revocation that says the community closed.
  bool community_open = true;
  // The policy's name when the connection opened, for the trace's `open` record.
  std::string policy_name = "open";
  // The community's policy now (the directory's map, refreshed on every
  // access change); empty in tests and replays, where community_open alone
  // decides. A connection with no subscription hears no revocation, so the
  // fast paths ask this too.
  std::function<bool()> still_open;
  std::string remote_ip;  // the client's address, for the write policy ("" if unknown)
  admission_policy policy;
  proto::filter_limits limits;
  size_t max_subscriptions = 64;
  size_t max_auth_keys = 16;  // pubkeys one connection may prove with AUTH
  size_t max_events_in_flight = 512;     // per connection, awaiting their commit
  size_t max_pending_live = 2000;        // live events buffered while history loads
  // Subscription state (filters as the hub holds them, remembered history
  // ids) this connection may hold, in bytes; 0 = no limit.
  size_t max_subscription_bytes = 1u << 20;
  // The node-wide budget for the same, plus histories waiting for the socket
  // to drain; shared by every connection. Null: none (tests, replays).
  memory_budget_ptr subscription_budget;
  // A history larger than this is sent in slices of at most this size, each
  // after the socket has drained (socket_sink::notify_drained).
  size_t history_slice_frames = 256;
  size_t history_slice_bytes = 1u << 20;
  // A history is read in pages (docs/protocol.md, "History in pages"): the
  // first of this many rows per filter, each later one twice the last (up
  // to the largest limit), read only once the socket holds at most
  // history_page_drain_bytes of what went before, so a client that stops
  // reading costs the node one page, not its whole history. 0: at once.
  uint32_t history_page_rows = 100;
  size_t history_page_drain_bytes = 64u << 10;
  // Bounded replica reads are on (docs/replicas.md): every write answer
  // reads the clock, and a later read must be proved after it
  // (read-your-writes). Off, nothing needs that time and no clock is read.
  bool note_write_answers = false;
  // Unsent history (text and per-frame overhead) this connection may hold
  // at once; a history that would pass it is refused. 0 = no limit. Without
  // it one slow reader could hold the whole node-wide budget.
  size_t max_history_bytes = 16u << 20;
  // Queued histories are ended when the socket has taken no slice of them
  // for this long, however slowly it still reads. 0 = never.
  caf::timespan history_stall = std::chrono::seconds(60);
  caf::timespan ingest_timeout = std::chrono::seconds(30);
  // How long a read may take for its caller (queue wait included); kept
  // above the reader sessions' statement_timeout (node config check), so a
  // query ends in the database before its caller gives up on it.
  caf::timespan read_timeout = std::chrono::seconds(30);
  read_admission_settings reads;  // in-flight bound and token buckets
  refusal_pacing refusals;        // when a flood of refused frames pauses reading
  policy_gate_settings write_policy;
  negentropy_settings negentropy;  // NIP-77 (connection_negentropy.cpp)
  // The node-wide budget of NIP-77 sets, apart from subscription_budget so
  // that sets never crowd out REQs. Null: none (tests, replays).
  memory_budget_ptr negentropy_budget;
  // --sync-pubkeys: once one of them is authenticated here, the connection's
  // events are vouched for (admission_request::vouched): `waggle sync --dir
  // up` sends other authors' events, of any age (docs/negentropy.md).
  std::set<std::string> sync_pubkeys;
};

struct connection_peers {
  ingest_actor ingest;
  hub_actor hub;
  reader_pool_actor reader;
  group_actor group;
  membership_actor membership;  // NIP-43 requests (null: refused as unavailable)
  write_policy_actor policy;  // null without --write-policy
};

struct connection_state;
using connection_ptr = connection_actor::stateful_pointer<connection_state>;

struct connection_state {
  connection_ptr self = nullptr;
  connection_settings settings;
  connection_peers peers;
  node_env env;
  socket_sink_ptr sink;

  std::string challenge;
  std::set<std::string> authed;  // pubkeys proven on this connection
  // The id of the AUTH event that last proved each of them: sent again, it
  // is answered from memory (no verify). At most max_auth_keys entries.
  std::unordered_map<std::string, std::string> auth_ids;
  // Its subscriptions, their grants and the bytes they are charged
  // (subscription_table.hpp); also numbers every read's ticket.
  subscription_table subs;
  // Histories too large to send at once, sent as the socket drains
  // (history_queue.hpp, history_sender.cpp).
  history_queue history;
  bool drain_armed = false;
  size_t events_in_flight = 0;
  // When this connection last had an event answered by ingest or the group
  // actor: a bounded replica read must be proved after it.
  steady_time last_write_answer{};
  read_admission reads;  // REQ/COUNT in flight, their buckets, their requests at the pool
  size_t frame_bytes = 0;  // the client frame being handled (0 between frames)
  refusal_pacer pacer;   // refusals answered, and when the socket last paused for them
  negentropy_sessions neg;  // NIP-77 sessions and the sets they reconcile
  bool draining = false;
  bool closed = false;
  bool invite_in_flight = false;  // one invite request at a time per connection
  bool traced = false;  // this connection's inputs are being recorded (docs/traces.md)

  ~connection_state();
  void start();
  void on_frame(const std::string& text);
  void on_live(const live_event& msg);
  void on_drain();
  void on_socket_closed();
  // Takes back every read of this connection still queued at the pool.
  void withdraw_all_reads();
  void on_drained(const socket_drained& room);
  void on_stall_check();
  void on_revoked(const channel_revoked& msg);
  void on_revoked(const access_revoked& msg);
  // Its address was blocked in its community: it closes, whatever it was doing.
  void on_blocked(const address_blocked& msg);
  bool open_now() const;
  // Records an input of the socket edge ("frame_in", "closed", "drain").
  void trace_input(std::string_view kind, const std::string* text = nullptr);

  static inline const char* name = "connection";

 private:
  void on_event(proto::event&& ev);
  void on_auth(proto::event&& ev);
  void on_req(proto::req_msg&& req);
  void on_count(proto::count_msg&& req);
  void on_close(const proto::close_msg& msg);
  // connection_negentropy.cpp
  void on_neg_open(proto::neg_open_msg&& msg);
  void on_neg_msg(proto::neg_msg&& msg);
  void on_neg_close(const proto::neg_close_msg& msg);
  void send_neg_err(const std::string& sub_id, const std::string& reason);
  // Every OK, CLOSED and NOTICE answering the client goes out through these
  // three and answer_client, the one place that paces a refusal, by its
  // prefix (refusal_weight; docs/protocol.md, "Refusal pacing").
  void send_ok(const std::string& id, bool accepted, const std::string& message);
  void send_closed(const std::string& sub_id, const std::string& message);
  void send_notice(const std::string& message);
  void answer_client(std::string frame, std::string_view message);
  void reject(const std::string& id, const status& st);
  // Counts `weight` refusals and, past the pacing burst, asks the socket to
  // stop reading for a while (refusal_pacer.hpp).
  void pace(double weight);
  void answer_with(const std::string& id, const answer& a);
  void on_ingest_reply(const std::string& id, const ingest_reply& reply);
  void dispatch(event_ptr ev, admission admitted);
  void submit(event_ptr ev);
  void submit_ephemeral(event_ptr ev, std::optional<std::string> channel);
  void hand_to_hub(event_ptr ev);
  void submit_membership(event_ptr ev);
  void request_invite(const std::string& sub_id, uint64_t generation, bool only_invites);
  void subscribe(const std::string& sub_id, uint64_t generation,
                 std::vector<proto::filter> filters, read_access access);
  read_access access_for(const std::vector<proto::filter>& filters) const;
  void on_history(const std::string& sub_id, uint64_t generation, const history_request& asked,
                  history_reply&& reply);
  void end_subscription(const std::string& sub_id, const std::string& message);
  // The same for a revocation, which is no answer to the client: unpaced.
  void revoke_subscription(const std::string& sub_id, const std::string& message);
  // history_sender.cpp: the history of a REQ, sent as the socket drains.
  bool charge_subscription(const std::string& sub_id, size_t bytes);
  void send_history(const std::string& sub_id, std::vector<std::string>&& raws,
                    std::optional<history_request> next_page);
  // Whether `bytes` more unsent history may be held (else the subscription
  // is ended, rate-limited).
  bool hold_history(const std::string& sub_id, size_t bytes);
  void read_page();
  void on_page(const std::string& sub_id, uint64_t generation, history_reply&& reply);
  void finish_history(const std::string& sub_id);
  void arm_drain(size_t at_most_bytes = SIZE_MAX);
  void history_progressed();
  void arm_stall_check(caf::timespan delay);
  bool admit_read(const std::string& sub_id, uint64_t ticket, bool is_count,
                  const std::vector<proto::filter>& filters);
  void drop_subscription(const std::string& sub_id);
  void finish_drain_if_idle();
  void send(std::string frame);
  // A live event's frame, its JSON shared with every other subscriber's.
  void send_live(const std::string& sub_id, const event_ptr& ev,
                 const std::shared_ptr<const std::string>& raw);
};

connection_actor::behavior_type connection_actor_impl(connection_ptr self,
                                                      connection_settings settings,
                                                      connection_peers peers, node_env env,
                                                      socket_sink_ptr sink);

}  // namespace waggle
