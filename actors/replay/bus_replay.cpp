#include "actors/replay/bus_replay.hpp"

#include <caf/atom.hpp>
#include <caf/error.hpp>

namespace waggle {

namespace {

replay_bus_actor::behavior_type replay_bus(replay_bus_actor::pointer self,
                                           std::shared_ptr<replay_numbered_log> log,
                                           replay_player_ptr player) {
  return {
    [self, log, player](bus_publish& p) { return log->hold<bus_ack>(self, *player, p); },
    [self, log, player](bus_subscribe& s) { return log->hold<bus_subscription>(self, *player, s); },
    [log, player](bus_unsubscribe u) { log->note(u, *player); },
    [self, log, player](bus_request& r) { return log->hold<bus_message>(self, *player, r); },
    // Promises are delivered from inside the actor that made them.
    [log, player](caf::atom_value, uint64_t n, const std::string& type, const std::string& json) {
      if (!log->answer(n, type, json))
        player->divergence_if_none({player->current_seq, "bus_probe", "bus_reply", type + " " + json,
                                    "the " + log->requests[n - 1].type
                                      + " does not wait for that"});
    },
  };
}

}  // namespace

bus_replay::bus_replay(caf::actor_system& sys, replay_player_ptr player, const node_env& env,
                       bus_probe_settings settings)
  : player_(std::move(player)), log_(std::make_shared<replay_numbered_log>()) {
  auto bus = sys.spawn(replay_bus, log_, player_);
  bus_ = caf::actor_cast<caf::actor>(bus);
  probe_ = caf::actor_cast<caf::actor>(
    sys.spawn(bus_probe_impl, caf::actor_cast<bus_actor>(bus), std::move(settings),
              env.for_actor("bus_probe")));
  player_->name(probe_.address(), "bus_probe");
}

std::optional<caf::message> bus_replay::input_of(const std::string& kind, const std::string& type,
                                                 const std::string& msg,
                                                 std::string& error) const {
  auto as_message = [&](auto decoded) -> std::optional<caf::message> {
    if (!decoded) {
      error = "not a " + type;
      return std::nullopt;
    }
    return caf::make_message(std::move(*decoded));
  };
  if (kind == "input" && type == "bus_message")
    return as_message(decode_trace_json<bus_message>(msg));
  if (kind == "input" && type == "bus_lagged")
    return as_message(decode_trace_json<bus_lagged>(msg));
  if (kind == "timer" && type == "bus_probe_tick")
    return as_message(decode_trace_json<bus_probe_tick>(msg));
  if (kind == "timer" && type == "bus_probe_deadline")
    return as_message(decode_trace_json<bus_probe_deadline>(msg));
  error = "the bus probe takes no " + kind + " " + type;
  return std::nullopt;
}

std::optional<uint64_t> bus_replay::match_out(uint64_t n, const std::string& type,
                                              const std::string& msg, std::string& replayed) {
  return log_->match_out(n, type, msg, replayed);
}

std::optional<caf::message> bus_replay::reply_of(uint64_t n, const std::string& type,
                                                 const std::string& msg,
                                                 std::string& error) const {
  return log_->reply_of(n, type, msg, "bus probe", error);
}

std::optional<std::string> bus_replay::unmatched_out() const { return log_->unmatched_out(); }

}  // namespace waggle
