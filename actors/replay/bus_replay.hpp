#pragma once

// The bus in a replay (docs/traces.md, "The bus"): the node's bus probe runs
// for real against a stand-in bus. The stand-in keeps every request the
// probe sends (numbered from 1 in arrival order, as the probe numbers them:
// one sender, one mailbox) with its response promise, and answers one only
// at its "bus_reply" record, with the recorded reply. Deliveries, lag
// notices and the probe's timers are its recorded inputs, fed at their
// records; the stand-in delivers nothing itself.

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <caf/actor.hpp>
#include <caf/actor_system.hpp>
#include <caf/message.hpp>
#include <rapidjson/document.h>

#include "actors/bus/bus_probe.hpp"
#include "actors/replay/numbered_log.hpp"
#include "actors/replay/replay_player.hpp"

namespace waggle {

// The stand-in: a bus, and the driver's ("reply", n, type, json).
using replay_bus_actor = bus_actor::extend<
  caf::reacts_to<caf::atom_value, uint64_t, std::string, std::string>>;

class bus_replay {
 public:
  // Spawns the stand-in and, over it, the probe with `settings`.
  bus_replay(caf::actor_system& sys, replay_player_ptr player, const node_env& env,
             bus_probe_settings settings);

  caf::actor probe() const { return probe_; }
  caf::actor bus() const { return bus_; }
  static bool owns(const std::string& actor) { return actor == "bus_probe"; }

  // The message an "input" or "timer" record of the probe stands for;
  // nullopt with `error` set when it cannot be fed (an unknown type, a
  // message that does not decode).
  std::optional<caf::message> input_of(const std::string& kind, const std::string& type,
                                       const std::string& msg, std::string& error) const;

  // A "bus_out" record: the replay's request `n` must be this one. Returns
  // when it was made, or nullopt with `replayed` saying what was sent instead.
  std::optional<uint64_t> match_out(uint64_t n, const std::string& type, const std::string& msg,
                                    std::string& replayed);

  // A "bus_reply" record: the message for the stand-in that answers request
  // `n`, or nullopt with `error` set (no such request, or not matched yet).
  std::optional<caf::message> reply_of(uint64_t n, const std::string& type,
                                       const std::string& msg, std::string& error) const;

  // A request the replay sent that no record holds (the first), if any.
  std::optional<std::string> unmatched_out() const;

 private:
  replay_player_ptr player_;
  std::shared_ptr<replay_numbered_log> log_;
  caf::actor bus_;
  caf::actor probe_;
};

}  // namespace waggle
