#include "actors/channels/roster_actor.hpp"

#include <algorithm>

#include "actors/support/log.hpp"
#include "actors/trace/trace_recorder.hpp"

namespace waggle {

void roster_state::init(roster_ptr self_ptr, int64_t community, std::string channel_name,
                        group_actor parent, hub_actor fanout, node_env e, caf::timespan idle) {
  self = self_ptr;
  community_id = community;
  channel = std::move(channel_name);
  group = std::move(parent);
  hub = std::move(fanout);
  env = std::move(e);
  idle_timeout = idle;
}

void roster_state::on_dirty(bool retry) {
  if (!retry)
    ++generation;
  if (in_flight)
    dirty = true;
  else
    publish();
}

void roster_state::publish() {
  in_flight = true;
  dirty = false;
  self
    ->request(group, caf::infinite, roster_publish_request{community_id, channel, env.unix_now()})
    // Not traced: the reply comes from the group actor, which a replay runs
    // for real (it records the session's reply it passes on), so a replay
    // has no stand-in that could inject this one.
    .then([this](roster_publish_reply& reply) { on_published(reply); },
          [this](caf::error& err) { on_publish_failed(err); });
}

void roster_state::on_published(roster_publish_reply& reply) {
  if (!reply.err.ok()) {
    log::warn("roster", "publication failed; retrying",
              {{"community", std::to_string(community_id)}, {"channel", channel},
               {"error", reply.err.message()}});
    return on_publication_done(false);
  }
  if (!reply.events.empty()) {
    if (env.stats)
      ++env.stats->rosters_published;
    committed_events batch;
    for (auto& ev : reply.events)
      batch.items.push_back({community_id, std::move(ev)});
    self->send(hub, std::move(batch));
  }
  on_publication_done(true);
}

void roster_state::on_publish_failed(const caf::error& err) {
  log::warn("roster", "publication failed; retrying",
            {{"channel", channel}, {"error", caf::to_string(err)}});
  on_publication_done(false);
}

void roster_state::on_publication_done(bool ok) {
  in_flight = false;
  if (!ok) {
    // Retry the whole publication: it captures the roster afresh.
    auto delay = std::chrono::milliseconds(std::min(100 << std::min(failures++, 6), 5000));
    self->delayed_send(self, delay, roster_dirty{true});
    return;
  }
  failures = 0;
  if (dirty)
    publish();
  else
    arm_idle_timer();
}

void roster_state::arm_idle_timer() {
  if (idle_timeout.count() > 0)
    self->delayed_send(self, idle_timeout, roster_idle_tick{generation});
}

void roster_state::on_idle_tick(uint64_t gen) {
  // Stale when a change came since it was armed (that change's publication
  // armed a newer one), or while anything is pending.
  if (gen != generation || in_flight || dirty || failures > 0)
    return;
  self->send(group, roster_idle{community_id, channel, generation});
}

roster_actor::behavior_type roster_actor_impl(roster_ptr self, int64_t community_id,
                                              std::string channel, group_actor group,
                                              hub_actor hub, node_env env,
                                              caf::timespan idle_timeout) {
  self->state.init(self, community_id, std::move(channel), std::move(group), std::move(hub),
                   std::move(env), idle_timeout);
  return {
    // -- changes ----------------------------------------------------------------
    // A change comes from the group actor; when this actor takes it decides where its
    // publication falls among the group's commands, so it is an input of the trace (a
    // retry is its own timer). A replay feeds it at that record, anonymously, and ignores
    // the group's message for it (docs/traces.md, "The schedule").
    [self](roster_dirty msg) {
      auto& env = self->state.env;
      if (!msg.retry && self->current_sender() && env.trace && env.trace->feeds_input("roster_dirty"))
        return;
      trace_section section{env};
      trace_node_message(env, msg.retry ? "timer" : "input", msg);
      self->state.on_dirty(msg.retry);
    },
    // -- idle stop --------------------------------------------------------------
    [self](roster_idle_tick msg) {
      trace_section section{self->state.env};
      trace_node_message(self->state.env, "timer", msg);
      self->state.on_idle_tick(msg.generation);
    },
    [self](roster_stop) { self->quit(); },
  };
}

}  // namespace waggle
