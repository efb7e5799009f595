#include "actors/connection/connection_actor.hpp"

#include <algorithm>

#include "actors/connection/store_request.hpp"
#include "actors/support/log.hpp"
#include "actors/trace/trace_recorder.hpp"
#include "messages/proto/nip29.hpp"
#include "messages/proto/nip43.hpp"

namespace waggle {

void connection_state::trace_input(std::string_view kind, const std::string* text) {
  if (!traced)
    return;
  trace_fields fields;
  if (text)
    fields.str("text", *text);
  env.trace->record(env.actor, kind, fields);
}

void connection_state::start() {
  traced = env.trace && env.trace->wants_connection(env.actor);
  // The open is recorded here, by the actor, in a section with the challenge it reads and
  // sends: recorded by the gateway's thread, another actor's input (a delivery claim's reply)
  // could land between the open and the challenge, an order a strict replay rejects.
  trace_section section{env.trace, traced};
  if (traced)
    env.trace->record(env.actor, "open", trace_fields{}
                                           .num("community", settings.community_id)
                                           .str("host", settings.host)
                                           .str("policy", settings.policy_name));
  challenge = env.random_challenge();
  send(proto::render_auth(challenge));
}

connection_state::~connection_state() {
  if (env.stats)
    env.stats->live_subscriptions -= static_cast<int64_t>(subs.size());
  // A closed connection gives back all it held to the node-wide budget.
  subs.release_all();
  history.release_all();
}

void connection_state::on_frame(const std::string& text) {
  // Answers given while this frame is handled may weigh by its size; later
  // verdicts (ingest, a reader) come when it is long gone.
  frame_bytes = text.size();
  struct forget {
    size_t& bytes;
    ~forget() { bytes = 0; }
  } forget_size{frame_bytes};
  auto parsed = proto::parse_client_message(text, settings.limits);
  if (auto* err = std::get_if<proto::parse_error>(&parsed)) {
    using rk = proto::parse_error::reply_kind;
    switch (err->reply) {
      case rk::ok:
        reject(err->ref, err->err);
        break;
      case rk::closed:
        if (env.stats && err->ref.size() > proto::max_subscription_id_len)
          env.stats->count_refused("sub_id_length");
        send_closed(err->ref, err->err.message());
        break;
      case rk::notice:
        send_notice(err->err.message());
        break;
      case rk::neg_err:
        send_neg_err(err->ref, err->err.message());
        break;
    }
    return;
  }
  std::visit(
    [this](auto&& msg) {
      using T = std::decay_t<decltype(msg)>;
      if constexpr (std::is_same_v<T, proto::event_msg>)
        on_event(std::move(msg.ev));
      else if constexpr (std::is_same_v<T, proto::auth_msg>)
        on_auth(std::move(msg.ev));
      else if constexpr (std::is_same_v<T, proto::req_msg>)
        on_req(std::move(msg));
      else if constexpr (std::is_same_v<T, proto::count_msg>)
        on_count(std::move(msg));
      else if constexpr (std::is_same_v<T, proto::neg_open_msg>)
        on_neg_open(std::move(msg));
      else if constexpr (std::is_same_v<T, proto::neg_msg>)
        on_neg_msg(std::move(msg));
      else if constexpr (std::is_same_v<T, proto::neg_close_msg>)
        on_neg_close(msg);
      else
        on_close(msg);
    },
    std::move(std::get<proto::client_message>(parsed)));
}

void connection_state::on_event(proto::event&& ev) {
  if (draining)
    return reject(ev.id, {ec::unavailable, "relay is shutting down"});
  auto now = env.unix_now();
  auto admitted = classify_event(ev, {authed, now, settings.policy, settings.relay_pubkey, true});
  // A sync peer's event refused for its age or its author is vouched for, as
  // an import would be, only where sync sends events: to be stored or to be
  // judged as a channel command; never an ephemeral event or a NIP-43
  // request replayed from the past (red team).
  if (admitted.route == route::reject &&
      std::any_of(authed.begin(), authed.end(),
                  [this](const std::string& k) { return settings.sync_pubkeys.contains(k); })) {
    auto vouched =
      classify_event(ev, {authed, now, settings.policy, settings.relay_pubkey, true, true});
    if (vouched.route == route::store || vouched.route == route::group_command)
      admitted = std::move(vouched);
  }
  if (admitted.route == route::reject)
    return reject(ev.id, admitted.refusal);
  if (events_in_flight >= settings.max_events_in_flight) {
    if (env.stats)
      env.stats->count_refused(admitted.route == route::ephemeral ? "ephemeral_in_flight"
                                                                  : "events_in_flight");
    return reject(ev.id, {ec::rate_limited, "too many events awaiting commit on this connection"});
  }
  auto ptr = std::make_shared<const proto::event>(std::move(ev));
  // Awaiting its verdict counts as in flight: a drain waits for it.
  ++events_in_flight;
  policy_gate(
    self, env, peers.policy, settings.write_policy, {ptr, now, settings.remote_ip},
    [this, ptr, admitted = std::move(admitted)]() mutable {
      --events_in_flight;
      dispatch(ptr, std::move(admitted));
    },
    [this, id = ptr->id](const answer& a) {
      --events_in_flight;
      answer_with(id, a);
      finish_drain_if_idle();
    });
}

void connection_state::dispatch(event_ptr ptr, admission admitted) {
  if (admitted.route == route::ephemeral)
    submit_ephemeral(std::move(ptr), std::move(admitted.channel));
  else if (admitted.route == route::membership)
    submit_membership(std::move(ptr));
  else
    submit(std::move(ptr));
  finish_drain_if_idle();
}

void connection_state::submit(event_ptr ptr) {
  ++events_in_flight;
  auto id = ptr->id;
  // Metrics only (not part of any decision), so a real clock is fine here.
  auto received = std::chrono::steady_clock::now();
  // Ingest's answer is recorded where this actor takes it, in a section with the OK it sends:
  // the COMMIT that answers also wakes the delivery supervisor (NOTIFY), whose input was now
  // and then recorded between ingest's reply_in and this OK, an order a strict replay
  // rejects. The replay hands the answer over at this record (docs/traces.md).
  bool from_ingest = !proto::nip29::is_group_command(ptr->kind);
  request_store(self, {peers.ingest, peers.group}, settings.ingest_timeout, settings.community_id,
                std::move(ptr), [this, id, received, from_ingest](ingest_reply& reply) {
                  trace_section section{env, from_ingest};
                  if (from_ingest && env.trace && env.trace->node_level())
                    env.trace->record(env.actor, "reply_in",
                                      trace_fields{}
                                        .str("type", "ingest_reply")
                                        .str("from", "ingest")
                                        .str("id", id));
                  if (env.stats)
                    env.stats->ack_latency.observe(std::chrono::duration<double>(
                      std::chrono::steady_clock::now() - received).count());
                  on_ingest_reply(id, reply);
                });
}

void connection_state::hand_to_hub(event_ptr ptr) {
  // In flight until the hub has fanned it out: a flood of ephemeral events
  // meets max_events_in_flight like stored ones, instead of filling the
  // hub's mailbox as fast as the socket delivers.
  ++events_in_flight;
  auto id = ptr->id;
  self->request(peers.hub, settings.ingest_timeout,
                ephemeral_publish{ingest_item{settings.community_id, std::move(ptr)}})
    .then(traced_reply<hub_ack>(self, env,
                                [this, id](hub_ack&) {
                                  --events_in_flight;
                                  answer_with(id, answer_for(status{}));
                                  finish_drain_if_idle();
                                }),
          [this, id](caf::error&) {
            --events_in_flight;
            reject(id, {ec::unavailable, "fanout unavailable"});
            finish_drain_if_idle();
          });
}

void connection_state::on_ingest_reply(const std::string& id, const ingest_reply& reply) {
  --events_in_flight;
  // Any answer, even a failure whose commit is in doubt: a bounded replica
  // read after it must be proved later (docs/replicas.md, read-your-writes).
  if (settings.note_write_answers)
    last_write_answer = env.steady_now();
  answer_with(id, answer_for(reply.outcome, reply.reason));
  finish_drain_if_idle();
}

void connection_state::on_auth(proto::event&& ev) {
  // The AUTH event that proved this key here, sent again (same id, and the id
  // commits to challenge, relay tag, created_at and key), proves nothing new:
  // it gets the OK it got, from memory, without another Schnorr verify
  // (red-team finding 2: one valid AUTH replayed in a loop burnt a core).
  if (auto known = auth_ids.find(ev.pubkey);
      known != auth_ids.end() && known->second == ev.id && authed.contains(ev.pubkey))
    return send_ok(ev.id, true, "");
  // Every key proven here is checked on each later write and shipped with
  // each channel read: a bound keeps one socket from carrying thousands.
  // Checked first: a key over the limit costs no signature check.
  if (!authed.contains(ev.pubkey) && authed.size() >= settings.max_auth_keys) {
    if (env.stats)
      env.stats->count_refused("auth_keys");
    return send_ok(ev.id, false,
                   status{ec::rate_limited, "too many keys on this connection"}.message());
  }
  auto st = check_auth_event(ev, challenge, settings.host, settings.host_port, env.unix_now(),
                             settings.policy);
  if (!st.ok()) {
    if (env.stats && st.reason.starts_with("AUTH relay tag"))
      env.stats->count_refused("relay_tag");
    return send_ok(ev.id, false, st.message());  // invalid: paced like any refusal
  }
  const bool first = authed.empty();
  const bool new_key = authed.insert(ev.pubkey).second;
  auth_ids[ev.pubkey] = ev.id;
  send_ok(ev.id, true, "");
  // A new key's verify is bounded by max_auth_keys; a fresh proof of a key
  // already proven here bought nothing, so its verify is paced like a
  // refusal: the verifies of one connection stay within the pace.
  if (!new_key)
    pace(1);
  if (first && !closed)
    sink->authenticated();  // ends the gateway's AUTH deadline
}

void connection_state::on_req(proto::req_msg&& req) {
  if (authed.empty())
    return send_closed(req.sub_id,
                       status{ec::auth_required, "authenticate with NIP-42 AUTH first"}.message());
  if (draining)
    return send_closed(req.sub_id, "error: relay is shutting down");
  const bool existing = subs.contains(req.sub_id);
  if (!existing && subs.size() >= settings.max_subscriptions)
    return send_closed(req.sub_id,
                       status{ec::rate_limited, "too many subscriptions on this connection (max "
                                                  + std::to_string(settings.max_subscriptions) + ")"}
                         .message());
  if (existing)
    drop_subscription(req.sub_id);  // a repeated id replaces the subscription
  auto generation = subs.next_generation();
  if (!admit_read(req.sub_id, generation, false, req.filters))
    return;
  subs.add(req.sub_id, generation);
  if (env.stats)
    ++env.stats->live_subscriptions;
  if (!charge_subscription(req.sub_id, waggle::subscription_bytes(req.filters)))
    return;
  auto access = access_for(req.filters);
  // NIP-43: a REQ for kind 28935 asks the relay for an invite code.
  bool wants_invite = false, only_invites = true;
  for (const auto& f : req.filters) {
    bool asks = f.kinds && std::find(f.kinds->begin(), f.kinds->end(),
                                     proto::nip43::kind_invite) != f.kinds->end();
    wants_invite = wants_invite || asks;
    only_invites = only_invites && asks && f.kinds->size() == 1;
  }
  // A REQ is access-checked before it is registered (the community, and
  // the channels it names): a refused one gets CLOSED and never any live
  // event, and the grant it gets is what revocations then narrow. In an open
  // community a REQ without channels needs none: its grant is the open
  // community, which the revocation that closes the community ends.
  if (access.channels.empty() && open_now()) {
    subs.grant(req.sub_id, {}, {true, true, {}, {authed.begin(), authed.end()}});
    subscribe(req.sub_id, generation, std::move(req.filters), std::move(access));
    if (wants_invite)
      request_invite(req.sub_id, generation, only_invites);
    return;
  }
  auto sub_id = req.sub_id;
  auto on_access = [this, sub_id, generation, filters = std::move(req.filters), access,
                    wants_invite, only_invites](access_reply& reply) mutable {
    if (!subs.is_current(sub_id, generation))
      return;
    reads.at_pool(generation, 0);  // on to the hub; nothing left to withdraw at the pool
    if (!reply.err.ok())
      return end_subscription(sub_id, reply.err.message());
    subs.grant(sub_id, std::move(reply.grants),
               reply.community.checked ? std::move(reply.community)
                                       : community_grant{true, settings.community_open, {},
                                                         {authed.begin(), authed.end()}});
    subscribe(sub_id, generation, std::move(filters), std::move(access));
    if (wants_invite)
      request_invite(sub_id, generation, only_invites);
  };
  auto asked =
    self->request(peers.reader, settings.read_timeout, access_request{settings.community_id, access});
  reads.at_pool(generation, asked.id().request_id().integer_value());
  std::move(asked)
    .then(traced_reply<access_reply>(self, env, std::move(on_access)),
          [this, sub_id, generation](caf::error&) {
            if (subs.is_current(sub_id, generation))
              end_subscription(sub_id, "error: access check failed");
          });
}

void connection_state::subscribe(const std::string& sub_id, uint64_t generation,
                                 std::vector<proto::filter> req_filters, read_access access) {
  auto filters = req_filters;
  // Register first, query second: once the hub acknowledges, every event it
  // has not yet seen will reach us live, and every event it has seen
  // committed before our query's snapshot, so nothing falls in between.
  // The query re-checks channel access for the same reason (a removal that
  // committed before the hub knew this subscription).
  self
    ->request(peers.hub, settings.read_timeout,
              hub_subscribe{self, settings.community_id, sub_id, generation,
                            std::move(req_filters)})
    .then(
      [this, sub_id, generation, filters = std::move(filters),
       access = std::move(access)](hub_ack) mutable {
        if (!subs.is_current(sub_id, generation))
          return;
        history_request req{settings.community_id, std::move(filters), std::move(access), {}};
        req.read_after_ns = last_write_answer.time_since_epoch().count();
        req.page.rows = settings.history_page_rows;
        // Kept for the pages after the first (the hub holds the filters too,
        // but as its index, not as a request).
        auto first = std::make_shared<const history_request>(req);
        auto asked = self->request(peers.reader, settings.read_timeout, std::move(req));
        reads.at_pool(generation, asked.id().request_id().integer_value());
        std::move(asked)
          .then(
            traced_reply<history_reply>(self, env,
                                        [this, sub_id, generation, first](history_reply& reply) {
                                          on_history(sub_id, generation, *first, std::move(reply));
                                        }),
            [this, sub_id, generation](caf::error&) {
              if (subs.is_current(sub_id, generation))
                end_subscription(sub_id, "error: history query failed");
            });
      },
      [this, sub_id, generation](caf::error&) {
        if (subs.is_current(sub_id, generation))
          end_subscription(sub_id, "error: subscription index unavailable");
      });
}

void connection_state::on_history(const std::string& sub_id, uint64_t generation,
                                  const history_request& asked, history_reply&& reply) {
  if (!subs.is_current(sub_id, generation))
    return;
  reads.done(generation);  // the REQ's read is over, whatever its answer
  if (!reply.err.ok())
    return end_subscription(sub_id, reply.err.message());
  // A removal the registration's check missed ends it here, answered as
  // any refusal of the REQ (paced).
  if (auto denied = subs.recheck(sub_id, reply.grants, reply.community); !denied.ok())
    return end_subscription(sub_id, denied.message());
  auto& sub = subs.get(sub_id);
  subscription_table::remember_history(sub, reply.raws);
  if (!charge_subscription(sub_id, sub.history_ids.size() * history_id_bytes))
    return;
  auto next = history.next_page_of(asked, reply);
  send_history(sub_id, std::move(reply.raws), std::move(next));
}


void connection_state::send_live(const std::string& sub_id, const event_ptr& ev,
                                 const std::shared_ptr<const std::string>& raw) {
  // The event's JSON is shared by every frame that carries it (the hub's one
  // copy, live_event::raw); only the ["EVENT","<sub id>", head is this
  // frame's own. Never an aliasing pointer into the event: a queued frame
  // would pin the parsed event, many times what the byte cap counts.
  if (!closed)
    sink->send_frame(out_frame{proto::render_event_head(sub_id),
                               raw ? raw : std::make_shared<const std::string>(ev->raw),
                               proto::event_tail});
}

void connection_state::on_live(const live_event& msg) {
  for (size_t k = 0; k < msg.sub_ids.size(); ++k) {
    auto& sub_id = msg.sub_ids[k];
    if (k >= msg.generations.size())
      continue;
    switch (subs.on_live(sub_id, msg.generations[k], msg.ev, settings.max_pending_live)) {
      case live_verdict::send:
        send_live(sub_id, msg.ev, msg.raw);
        break;
      case live_verdict::overflow:
        end_subscription(sub_id, "error: too many live events while history was loading");
        break;
      case live_verdict::stale:  // closed or replaced while the event was on its way
      case live_verdict::sent:
      case live_verdict::held:
        break;
    }
  }
}

void connection_state::on_count(proto::count_msg&& req) {
  if (authed.empty())
    return send_closed(req.sub_id,
                       status{ec::auth_required, "authenticate with NIP-42 AUTH first"}.message());
  auto sub_id = req.sub_id;
  auto ticket = subs.next_generation();
  if (!admit_read(sub_id, ticket, true, req.filters))
    return;
  auto access = access_for(req.filters);
  auto asked = self->request(peers.reader, settings.read_timeout,
                             count_request{settings.community_id, std::move(req.filters),
                                           std::move(access),
                                           last_write_answer.time_since_epoch().count()});
  const auto request_id = asked.id().request_id().integer_value();
  reads.at_pool(ticket, request_id);
  std::move(asked).then(
    traced_reply<count_reply>(self, env, [this, sub_id, ticket](count_reply& reply) {
      reads.done(ticket);
      if (!reply.err.ok())
        send_closed(sub_id, reply.err.message());  // query took too long: paced
      else
        send(proto::render_count(sub_id, reply.count));
    }),
    [this, sub_id, ticket, request_id](caf::error&) {
      reads.done(ticket);
      // Timed out: still queued at the pool, it must not run for nobody (and
      // its freed slot must not let a backlog grow past the bound).
      self->send(peers.reader, read_withdraw{{request_id}, false});
      send_closed(sub_id, "error: count failed");
    });
}

bool connection_state::admit_read(const std::string& sub_id, uint64_t ticket, bool is_count,
                                  const std::vector<proto::filter>& filters) {
  // The buckets' clock is read from the source, unrecorded: a trace replays
  // with a clock that stands still (full buckets never refill), and the
  // defaults are far above what a recorded story spends.
  auto now = env.sources.steady_now ? env.sources.steady_now() : bucket_clock::now();
  auto refused = reads.admit(ticket, sub_id, is_count, filters, authed, settings.remote_ip, now);
  if (refused.st.ok())
    return true;
  if (env.stats)
    env.stats->count_refused(refused.label);
  send_closed(sub_id, refused.st.message());
  return false;
}

void connection_state::withdraw_all_reads() {
  if (reads.any_at_pool() || history.reading_pages())
    self->send(peers.reader, read_withdraw{{}, true});
}

void connection_state::on_close(const proto::close_msg& msg) {
  if (subs.contains(msg.sub_id))
    drop_subscription(msg.sub_id);
}

void connection_state::drop_subscription(const std::string& sub_id) {
  subs.remove(sub_id);
  // Its queued history goes at once, and a page still queued at the pool
  // must not run for nobody.
  if (auto reading = history.drop(sub_id); !reading.empty())
    self->send(peers.reader, read_withdraw{std::move(reading), false});
  if (auto at_most = history.drain_after_drop())
    arm_drain(*at_most);
  // Its reads still queued at the pool are withdrawn: nobody waits for them.
  if (auto withdrawn = reads.end_sub(sub_id); !withdrawn.empty())
    self->send(peers.reader, read_withdraw{std::move(withdrawn), false});
  if (env.stats)
    --env.stats->live_subscriptions;
  self->send(peers.hub, hub_unsubscribe{self, sub_id});
}

void connection_state::end_subscription(const std::string& sub_id, const std::string& message) {
  drop_subscription(sub_id);
  send_closed(sub_id, message);
}

void connection_state::revoke_subscription(const std::string& sub_id, const std::string& message) {
  // Not an answer to anything the client sent (an admin removed it, or the
  // channel or community changed): never counted against its pace.
  drop_subscription(sub_id);
  send(proto::render_closed(sub_id, message));
}

void connection_state::on_drain() {
  draining = true;
  finish_drain_if_idle();
}

void connection_state::finish_drain_if_idle() {
  if (!draining || events_in_flight > 0 || closed)
    return;
  sink->close(1001, "relay shutting down");
  closed = true;
  withdraw_all_reads();
  self->quit();
}

void connection_state::on_socket_closed() {
  closed = true;
  withdraw_all_reads();
  self->quit();
}

connection_actor::behavior_type connection_actor_impl(connection_ptr self,
                                                      connection_settings settings,
                                                      connection_peers peers, node_env env,
                                                      socket_sink_ptr sink) {
  auto& st = self->state;
  st.self = self;
  st.settings = std::move(settings);
  st.peers = std::move(peers);
  st.env = std::move(env);
  st.sink = std::move(sink);
  st.reads = read_admission{st.settings.reads};
  st.subs = subscription_table{st.settings.max_subscription_bytes,
                               st.settings.subscription_budget};
  st.history = history_queue{{st.settings.history_slice_frames, st.settings.history_slice_bytes,
                              st.settings.max_history_bytes, st.settings.history_stall,
                              st.settings.history_page_drain_bytes, st.settings.limits.max_limit},
                             st.settings.subscription_budget};
  st.neg.configure(st.settings.negentropy, st.settings.negentropy_budget);
  // If a core actor dies, this connection's subscriptions and in-flight
  // events died with it: close so the client reconnects to the restarted node
  // parts instead of waiting on a silent subscription.
  self->monitor(st.peers.ingest);
  self->monitor(st.peers.hub);
  self->monitor(st.peers.reader);
  if (st.peers.group)
    self->monitor(st.peers.group);
  if (st.peers.membership)
    self->monitor(st.peers.membership);
  if (st.peers.policy)
    self->monitor(st.peers.policy);
  // CAF 0.17 keeps a monitor on the monitored actor, with a weak reference to
  // the observer, until that actor dies or the observer demonitors: without
  // this, every closed connection's whole allocation stayed pinned by the
  // long-lived core actors (1.7 KB per connection, found by waggle-load's
  // idle workload). Runs however the actor ends.
  self->attach_functor([self, peers = st.peers] {
    self->demonitor(peers.ingest.address());
    self->demonitor(peers.hub.address());
    self->demonitor(peers.reader.address());
    if (peers.group)
      self->demonitor(peers.group.address());
    if (peers.membership)
      self->demonitor(peers.membership.address());
    if (peers.policy)
      self->demonitor(peers.policy.address());
  });
  self->set_down_handler([self](const caf::down_msg&) {
    auto& st = self->state;
    if (!st.closed) {
      st.sink->close(1011, "relay component restarted; reconnect");
      st.closed = true;
    }
    st.withdraw_all_reads();  // nobody will take their answers
    self->quit();
  });
  st.start();
  return {
    // Each recorded input is a trace_section: what it makes follows it in the trace.
    [self](const socket_frame& frame) {
      trace_section section{self->state.env.trace, self->state.traced};
      self->state.trace_input("frame_in", &frame.text);
      self->state.on_frame(frame.text);
      self->state.sink->frame_handled();  // the session's frame credit
    },
    [self](const live_event& msg) { self->state.on_live(msg); },
    [self](const socket_drained& room) { self->state.on_drained(room); },
    [self](history_stall_check) { self->state.on_stall_check(); },
    [self](drain_request) {
      trace_section section{self->state.env.trace, self->state.traced};
      self->state.trace_input("drain");
      self->state.on_drain();
    },
    [self](socket_closed) {
      trace_section section{self->state.env.trace, self->state.traced};
      self->state.trace_input("closed");
      self->state.on_socket_closed();
    },
    [self](const channel_revoked& msg) { self->state.on_revoked(msg); },
    [self](const access_revoked& msg) { self->state.on_revoked(msg); },
    [self](const address_blocked& msg) { self->state.on_blocked(msg); },
  };
}

}  // namespace waggle
