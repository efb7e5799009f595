#include "actors/replay/cluster_replay.hpp"

namespace waggle {

namespace {

replay_relay_actor::behavior_type replay_relay(replay_relay_actor::pointer self,
                                               std::shared_ptr<replay_numbered_log> log,
                                               replay_player_ptr player) {
  return {
    // The bus and the relay's own timers reach no stand-in: nothing runs them.
    [](bus_message&) {},
    [](bus_lagged&) {},
    [](cluster_relay_tick&) {},
    [log, player](cluster_local_commit& m) { log->note(m, *player); },
    [log, player](cluster_local_ephemeral& m) { log->note(m, *player); },
    [self, log, player](cluster_barrier& b) {
      return log->hold<cluster_barrier_done>(self, *player, b);
    },
    [self, log, player](roster_route& r) { return log->hold<roster_routed>(self, *player, r); },
    // Promises are delivered from inside the actor that made them.
    [log, player](caf::atom_value, uint64_t n, const std::string& type, const std::string& json) {
      if (!log->answer(n, type, json))
        player->divergence_if_none({player->current_seq, "hub", "cluster_reply",
                                    type + " " + json,
                                    "the " + log->requests[n - 1].type
                                      + " does not wait for that"});
    },
  };
}

}  // namespace

cluster_replay::cluster_replay(caf::actor_system& sys, replay_player_ptr player)
  : player_(std::move(player)), log_(std::make_shared<replay_numbered_log>()) {
  relay_ = caf::actor_cast<caf::actor>(sys.spawn(replay_relay, log_, player_));
  player_->name(relay_.address(), "cluster_relay");
}

cluster_attach cluster_replay::attach() const {
  return cluster_attach{caf::actor_cast<cluster_relay_actor>(relay_)};
}

bool cluster_replay::owns(const std::string& actor, const std::string& kind,
                          const std::string& type) {
  if (actor != "hub")
    return false;
  if (kind == "cluster_out" || kind == "cluster_reply")
    return true;
  return kind == "input"
         && (type == "cluster_committed" || type == "cluster_ephemeral" || type == "cluster_sync"
             || type == "cluster_attach" || type == "channel_revoked"
             || type == "access_revoked");
}

std::optional<caf::message> cluster_replay::input_of(const std::string& type,
                                                     const std::string& msg,
                                                     std::string& error) const {
  auto as_message = [&](auto decoded) -> std::optional<caf::message> {
    if (!decoded) {
      error = "not a " + type;
      return std::nullopt;
    }
    return caf::make_message(std::move(*decoded));
  };
  if (type == "cluster_committed")
    return as_message(decode_trace_json<cluster_committed>(msg));
  if (type == "cluster_ephemeral")
    return as_message(decode_trace_json<cluster_ephemeral>(msg));
  if (type == "cluster_sync")
    return as_message(decode_trace_json<cluster_sync>(msg));
  if (type == "channel_revoked")
    return as_message(decode_trace_json<channel_revoked>(msg));
  if (type == "access_revoked")
    return as_message(decode_trace_json<access_revoked>(msg));
  if (type == "cluster_attach") {
    // The handle was written as null (who, not what): the replay's relay is the stand-in.
    if (!decode_trace_json<cluster_attach>(msg)) {
      error = "not a cluster_attach";
      return std::nullopt;
    }
    return caf::make_message(attach());
  }
  error = "the hub takes no input " + type + " from the cluster";
  return std::nullopt;
}

}  // namespace waggle
