#pragma once

// The cluster in a replay (docs/traces.md, "The cluster"): a node on a bus
// other than inproc ran the clustered hub, with the cluster tail (a database
// connection) and the cluster relay (the bus) beside it. The replay runs the
// clustered hub and neither of the others: what the tail and relay handed
// the hub (the tail's pages and revocations, the relay's ephemeral events,
// syncs and attach) are its recorded inputs, fed at their records; what the
// hub sent the relay (doorbell commits, ephemeral events, barrier requests)
// goes to a stand-in relay that numbers it (cluster_out), and the other
// nodes' answer to a barrier is delivered at its cluster_reply record.

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include <caf/actor.hpp>
#include <caf/actor_system.hpp>
#include <caf/message.hpp>

#include "actors/replay/numbered_log.hpp"
#include "actors/replay/replay_player.hpp"
#include "messages/interfaces.hpp"

namespace waggle {

// The stand-in: a relay, and the driver's ("reply", n, type, json).
using replay_relay_actor = cluster_relay_actor::extend<
  caf::reacts_to<caf::atom_value, uint64_t, std::string, std::string>>;

class cluster_replay {
 public:
  explicit cluster_replay(caf::actor_system& sys, replay_player_ptr player);

  caf::actor relay() const { return relay_; }
  // What the live relay's attach is in the replay: the stand-in.
  cluster_attach attach() const;
  // The hub's records that are the cluster's: its inputs from the tail and
  // the relay, what it sent the relay and the relay's answers.
  static bool owns(const std::string& actor, const std::string& kind, const std::string& type);

  // The message an "input" record of the hub stands for; nullopt with
  // `error` set when it cannot be fed.
  std::optional<caf::message> input_of(const std::string& type, const std::string& msg,
                                       std::string& error) const;
  std::optional<uint64_t> match_out(uint64_t n, const std::string& type, const std::string& msg,
                                    std::string& replayed) {
    return log_->match_out(n, type, msg, replayed);
  }
  std::optional<caf::message> reply_of(uint64_t n, const std::string& type,
                                       const std::string& msg, std::string& error) const {
    return log_->reply_of(n, type, msg, "hub (to the cluster relay)", error);
  }
  std::optional<std::string> unmatched_out() const { return log_->unmatched_out(); }

 private:
  replay_player_ptr player_;
  std::shared_ptr<replay_numbered_log> log_;
  caf::actor relay_;
};

}  // namespace waggle
