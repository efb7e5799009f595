#include "actors/channels/group_actor.hpp"

#include <memory>

#include "actors/fanout/revocations.hpp"
#include "actors/support/log.hpp"
#include "actors/support/metrics.hpp"
#include "actors/trace/trace_recorder.hpp"
#include "actors/channels/roster_actor.hpp"
#include "actors/channels/ttl_reaper.hpp"
#include "messages/proto/nip29.hpp"

namespace waggle {

namespace {

// The turn-taker of the relay's own publications within a community (no
// pubkey is spelled like this).
constexpr const char* relay_sender = "(relay)";

}  // namespace

void group_state::init(group_ptr self_ptr, std::vector<group_session_actor> group_sessions,
                       hub_actor fanout, node_env e, group_settings s) {
  self = self_ptr;
  sessions = std::move(group_sessions);
  idle.assign(sessions.size(), true);
  hub = std::move(fanout);
  env = std::move(e);
  settings = std::move(s);
  queue = group_queue{settings.max_queue_per_community};
  for (auto& session : sessions)
    self->link_to(session);
  if (!settings.database_url.empty())
    reaper = self->spawn<caf::detached + caf::linked>(ttl_reaper_actor_impl, settings.database_url,
                                                      group_actor{self}, settings.reap_interval);
  if (settings.repair_on_start)
    // A restart lost the roster actors' pending publications (and maybe a
    // command's effects between its COMMIT and our reply): republish every
    // roster that differs from the membership. Outside the queue: it runs
    // before traffic, and a command dealt to this session waits behind it.
    self->request(sessions.front(), caf::infinite, roster_repair_request{env.unix_now()})
      .then(traced_reply<roster_repair_reply>(self, env, [this](roster_repair_reply& reply) {
              if (!reply.events.empty())
                self->send(hub, committed_events{std::move(reply.events)});
            }),
            [](caf::error&) {});
}

// -- the queue ----------------------------------------------------------------

bool group_state::enqueue(group_queue::item it, std::function<void(size_t)> run) {
  it.id = ++next_id;
  auto id = it.id;
  if (!queue.push(std::move(it)))
    return false;
  work.emplace(id, std::move(run));
  dispatch();
  return true;
}

void group_state::dispatch() {
  for (size_t s = 0; s < sessions.size(); ++s) {
    if (!idle[s])
      continue;
    auto it = queue.next();
    if (!it)
      return;
    idle[s] = false;
    auto i = work.find(it->id);
    auto run = std::move(i->second);
    work.erase(i);
    run(s);
  }
}

void group_state::finished(size_t session, int64_t community_id, const std::string& channel) {
  idle[session] = true;
  queue.done(community_id, channel);
  dispatch();
}

// -- commands -----------------------------------------------------------------

caf::typed_response_promise<ingest_reply> group_state::on_command(const group_request& req) {
  auto promise = self->make_response_promise<ingest_reply>();
  auto community_id = req.community_id;
  auto ev = req.ev;
  std::string channel;  // a malformed command (no `h`) is refused by the session
  if (ev)
    if (auto cmd = proto::nip29::parse_group_command(*ev))
      channel = cmd->group;
  auto run = [this, promise, community_id, ev, channel](size_t s) mutable {
    // No timeout: the reply comes from the session after COMMIT (or a
    // definite failure); a timeout could not tell whether it committed.
    self->request(sessions[s], caf::infinite, group_command_request{community_id, ev})
      .then(traced_reply<group_command_reply>(
              self, env,
              [this, promise, community_id, ev, channel, s](group_command_reply& reply) mutable {
                auto answer = on_command_reply(community_id, ev, reply);
                // A command that ended access (or may have: a duplicate of
                // one) is answered after the cluster barrier, and its
                // channel's next command waits for it too, so a deletion of
                // the command cannot commit while other nodes are still to
                // read it. The session is free at once.
                auto outcome = reply.result.outcome;
                bool barrier =
                  (outcome == write_outcome::stored && ends_access(reply.change))
                  || (outcome == write_outcome::duplicate && ev
                      && !revocations_of(community_id, *ev).empty());
                if (!barrier) {
                  promise.deliver(std::move(answer));
                  finished(s, community_id, channel);
                  return;
                }
                idle[s] = true;
                answer_after_barrier(promise, std::move(answer), community_id, channel);
                dispatch();
              }),
            [this, promise, community_id, ev, channel, s](caf::error&) mutable {
              after_uncertain(community_id, ev);
              promise.deliver(ingest_reply{write_outcome::failed, "group session unavailable"});
              finished(s, community_id, channel);
            });
  };
  auto sender = ev ? ev->pubkey : std::string{};
  if (!enqueue({community_id, sender, channel, 0, true}, std::move(run))) {
    if (env.stats)
      env.stats->count_refused("group_queue_full");
    promise.deliver(ingest_reply{write_outcome::rate_limited,
                                 "too many channel commands waiting in this community, retry"});
  }
  return promise;
}

ingest_reply group_state::on_command_reply(int64_t community_id, const event_ptr& ev,
                                           const group_command_reply& reply) {
  if (reply.result.outcome == write_outcome::stored)
    after_commit(community_id, ev, reply.change);
  else if (reply.result.outcome == write_outcome::duplicate
           || reply.result.outcome == write_outcome::failed)
    after_uncertain(community_id, ev);
  return ingest_reply{reply.result.outcome, reply.result.reason};
}

// -- roster publications --------------------------------------------------------

caf::typed_response_promise<roster_publish_reply>
group_state::on_publish(const roster_publish_request& req) {
  auto promise = self->make_response_promise<roster_publish_reply>();
  auto run = [this, promise, req](size_t s) mutable {
    self->request(sessions[s], caf::infinite, req)
      .then(traced_reply<roster_publish_reply>(self, env,
                                               [this, promise, req, s](roster_publish_reply& reply) mutable {
                                                 promise.deliver(std::move(reply));
                                                 finished(s, req.community_id, req.channel);
                                               }),
            [this, promise, req, s](caf::error& err) mutable {
              promise.deliver(err);
              finished(s, req.community_id, req.channel);
            });
  };
  // Unbounded: at most one per roster actor is out or waiting.
  enqueue({req.community_id, relay_sender, req.channel, 0, false}, std::move(run));
  return promise;
}

caf::typed_response_promise<roster_repair_reply>
group_state::on_repair(const roster_repair_request& req) {
  auto promise = self->make_response_promise<roster_repair_reply>();
  self->request(sessions.front(), caf::infinite, req)
    .then(traced_reply<roster_repair_reply>(
            self, env,
            [this, promise](roster_repair_reply& reply) mutable {
              if (!reply.events.empty())
                self->send(hub, committed_events{reply.events});
              promise.deliver(std::move(reply));
            }),
          [promise](caf::error& err) mutable {
            roster_repair_reply reply;
            reply.err = {ec::unavailable, "group session unavailable: " + caf::to_string(err)};
            promise.deliver(std::move(reply));
          });
  return promise;
}

// Every session's connection must pass: each one writes 39002s.
caf::typed_response_promise<fence_probe_reply> group_state::on_fence_probe() {
  auto promise = self->make_response_promise<fence_probe_reply>();
  auto left = std::make_shared<size_t>(sessions.size());
  auto first = std::make_shared<status>();
  auto one = [promise, left, first](const status& st) mutable {
    if (!st.ok() && first->ok())
      *first = st;
    if (--*left == 0)
      promise.deliver(fence_probe_reply{*first});
  };
  for (auto& session : sessions)
    self->request(session, caf::infinite, fence_probe_request{})
      .then(traced_reply<fence_probe_reply>(self, env,
                                            [one](fence_probe_reply& reply) mutable {
                                              one(reply.err);
                                            }),
            [one](caf::error& err) mutable {
              one({ec::unavailable, "group session unavailable: " + caf::to_string(err)});
            });
  return promise;
}

void group_state::on_archived(const channels_archived& msg) {
  // 39000 carries the archived flag: republish.
  for (auto& c : msg.channels)
    mark_dirty(c.community_id, c.channel);
}

void group_state::after_commit(int64_t community_id, const event_ptr& ev,
                               const group_change& change) {
  self->send(hub, committed_events{{ingest_item{community_id, ev}}});
  for (const auto& pk : change.removed)
    self->send(hub, channel_revoked{community_id, change.channel, pk, false});
  if (change.deleted)
    self->send(hub, channel_revoked{community_id, change.channel, "", true});
  else if (change.became_private)
    self->send(hub, channel_revoked{community_id, change.channel, "", false});
  if (change.any())
    mark_dirty(community_id, change.channel);
}

bool group_state::ends_access(const group_change& change) {
  return !change.removed.empty() || change.deleted || change.became_private;
}

// A command that ended someone's access is answered once every other node
// of the cluster has handled the commit, so none of them delivers that
// someone anything after the OK (docs/scaling.md). A node that did not
// confirm in time is named in the OK's message: the change is committed,
// and that node ends the subscriptions when its tail reads it, before
// anything that committed later.
void group_state::answer_after_barrier(caf::typed_response_promise<ingest_reply> promise,
                                       ingest_reply answer, int64_t community_id,
                                       std::string channel) {
  self->request(hub, std::chrono::seconds(10), cluster_barrier{})
    .then(
      [this, promise, answer, community_id, channel](cluster_barrier_done& done) mutable {
        queue.done(community_id, channel);
        dispatch();
        if (!done.unconfirmed.empty()) {
          std::string names;
          for (auto& n : done.unconfirmed)
            names += (names.empty() ? "" : ", ") + n;
          answer.reason = "committed; not yet confirmed by node(s) " + names
                           + ", which end the affected subscriptions when they read it";
          log::warn("group", "a revocation was not confirmed by every node", {{"nodes", names}});
        }
        promise.deliver(std::move(answer));
      },
      [this, promise, answer, community_id, channel](caf::error&) mutable {
        queue.done(community_id, channel);
        dispatch();
        answer.reason = "committed; the cluster did not confirm in time";
        promise.deliver(std::move(answer));
      });
}

// A command whose outcome we cannot trust to describe what committed: a
// duplicate (its first copy committed, but whoever sent that may never have
// heard, e.g. after an in-doubt COMMIT or a restart of this actor) or a
// failure (it may have committed). Fail closed: revoke whatever access the
// command could have ended, and republish the channel's state from the
// database. A revocation that turns out unnecessary only makes a client
// send its REQ again.
void group_state::after_uncertain(int64_t community_id, const event_ptr& ev) {
  auto cmd = proto::nip29::parse_group_command(*ev);
  if (!cmd)
    return;
  for (auto& r : revocations_of(community_id, *ev).channels)
    self->send(hub, std::move(r));
  mark_dirty(community_id, cmd->group);
}

// -- roster actors --------------------------------------------------------------

void group_state::mark_dirty(int64_t community_id, const std::string& channel) {
  if (!settings.route_rosters)
    return mark_dirty_here(community_id, channel);
  // The change committed before this asks, so the owner's capture (taken
  // under the fence after it hears) sees it. Any doubt publishes here.
  self->request(hub, std::chrono::seconds(10), roster_route{community_id, channel})
    .then(
      [this, community_id, channel](roster_routed& routed) {
        if (!routed.elsewhere)
          mark_dirty_here(community_id, channel);
      },
      [this, community_id, channel](caf::error&) { mark_dirty_here(community_id, channel); });
}

void group_state::mark_dirty_here(int64_t community_id, const std::string& channel) {
  auto key = std::make_pair(community_id, channel);
  auto i = rosters.find(key);
  if (i == rosters.end()) {
    auto roster_name = "roster:" + std::to_string(community_id) + ":" + channel;
    auto roster = self->spawn<caf::linked>(roster_actor_impl, community_id, channel,
                                           group_actor{self}, hub,
                                           env.for_actor(roster_name), settings.roster_idle);
    if (env.trace)
      env.trace->spawned(roster_name, caf::actor_cast<caf::actor>(roster));
    if (auto stats = env.stats) {
      ++stats->roster_actors;
      caf::actor_cast<caf::abstract_actor*>(roster)->attach_functor(
        [stats] { --stats->roster_actors; });
    }
    i = rosters.emplace(key, roster_entry{std::move(roster), 0}).first;
  }
  ++i->second.sent;
  self->send(i->second.handle, roster_dirty{});
}

void group_state::on_roster_idle(const roster_idle& msg) {
  auto i = rosters.find({msg.community_id, msg.channel});
  // A change sent after it reported is on its way to it: it stays.
  if (i == rosters.end() || i->second.sent != msg.generation)
    return;
  self->send(i->second.handle, roster_stop{});
  rosters.erase(i);
}

group_actor::behavior_type group_actor_impl(group_ptr self,
                                            std::vector<group_session_actor> sessions,
                                            hub_actor hub, node_env env, group_settings settings) {
  self->state.init(self, std::move(sessions), std::move(hub), std::move(env), std::move(settings));
  return {
    // -- commands ---------------------------------------------------------------
    [self](group_request& req) { return self->state.on_command(req); },
    // -- fence probe and roster repair ------------------------------------------
    [self](fence_probe_request) { return self->state.on_fence_probe(); },
    [self](roster_repair_request& req) { return self->state.on_repair(req); },
    // -- roster actors ----------------------------------------------------------
    [self](roster_publish_request& req) { return self->state.on_publish(req); },
    [self](roster_idle& msg) { self->state.on_roster_idle(msg); },
    // -- reaper -----------------------------------------------------------------
    // -- the cluster -------------------------------------------------------------
    [self](roster_requested& msg) {
      // From another node, through this node's relay: an input of the node.
      trace_section section{self->state.env};
      trace_node_message(self->state.env, "input", msg);
      self->state.mark_dirty_here(msg.community_id, msg.channel);
    },
    [self](channels_archived& msg) {
      // From the TTL reaper's database session: an input of the node.
      trace_section section{self->state.env};
      trace_node_message(self->state.env, "input", msg);
      self->state.on_archived(msg);
    },
  };
}

}  // namespace waggle
