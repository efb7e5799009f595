#pragma once

// The delivery actors in a replay (docs/traces.md, "Delivery"): a
// supervisor and its slots run for real (the operator listeners' one,
// "delivery_supervisor", and the push queue's, "push_delivery": one
// delivery_replay each); its store is a database
// stand-in (replay_db_stub: its claim and completion replies come from the
// trace), the HTTP client is a stand-in that answers nothing and keeps what
// it was asked to POST, and the listen actor is not run at all: its wakes
// and health verdicts are the supervisor's recorded inputs, as are the push
// matcher's delivery_ready. Each slot's delivery_response_in is fed to that
// slot at its record; the supervisor's poll ticks and completion flushes fire
// at their "timer" records, as the other timers do.

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <caf/actor.hpp>
#include <caf/actor_system.hpp>
#include <caf/message.hpp>

#include "actors/delivery/delivery_supervisor.hpp"
#include "actors/replay/replay_player.hpp"
#include "gateway/http_client.hpp"

namespace waggle {

// A slot's POST as the replay compares it: where, which delivery, what body.
// The Authorization header is left out: the replay has no relay key (it signs
// with a stand-in one), and its clock reading is checked as a reading.
std::string render_delivery_post(const std::string& url, const std::string& delivery_id,
                                 const std::string& body);

// What the stand-in HTTP client was asked to POST, in order.
struct replay_posts {
  struct post {
    std::string text;     // render_delivery_post
    uint64_t during = 0;  // the input being replayed when it was made
    bool matched = false;
  };
  std::vector<post> made;
};

class replay_http_client : public gateway::http_client {
 public:
  replay_http_client(replay_player_ptr player, std::shared_ptr<replay_posts> posts)
    : player_(std::move(player)), posts_(std::move(posts)) {}
  // Kept, never answered: the answer is the slot's recorded input.
  void post(gateway::http_post request, std::function<void(gateway::http_result)> done) override;

 private:
  replay_player_ptr player_;
  std::shared_ptr<replay_posts> posts_;
};

// Which supervisor: its name in the trace, its store's, and the settings
// the node spawns it with (node_supervisor.cpp, spawn_delivery) as far as
// they decide what it does; its slots are named `settings.queue`-slot-N.
struct delivery_replay_spec {
  std::string supervisor;  // "delivery_supervisor", "push_delivery"
  std::string store;       // "delivery_store", "push_store"
  delivery_settings settings;
};
// The operator listeners' supervisor with `slots` slots.
delivery_replay_spec listener_delivery_spec(uint32_t slots);
// The push queue's: no per-route cap, no claim when a slot frees (first
// attempts come from the matcher), completions held `completion_delay_ms`.
delivery_replay_spec push_delivery_spec(uint32_t slots, int64_t completion_delay_ms);

class delivery_replay {
 public:
  // Spawns the supervisor (which spawns its slots) over `store`, a
  // replay_db_stub named `spec.store`.
  delivery_replay(caf::actor_system& sys, replay_player_ptr player, const node_env& env,
                  delivery_replay_spec spec, delivery_store_actor store);

  caf::actor supervisor() const { return supervisor_; }
  // Whether the record's actor is this supervisor or one of its slots.
  bool owns(const std::string& actor) const;

  struct input {
    caf::actor to;
    caf::message msg;
  };
  // The message an "input" or "timer" record of one of its actors stands
  // for, and the actor it goes to. nullopt: not a delivery record. On a record
  // that is one but cannot be fed (no such slot, a message that does not
  // decode), `error` says why and nullopt is returned.
  std::optional<input> input_of(const std::string& actor, const std::string& kind,
                                const std::string& type, const std::string& msg,
                                std::string& error) const;

  // A recorded post_out: the first POST of the replay with the same text
  // that no earlier record matched (slots run on their own threads, so two
  // slots' records may come in either order). Returns the post's `during`,
  // or nullopt with `replayed` set to what the replay posted instead.
  std::optional<uint64_t> match_post(const std::string& expected, std::string& replayed);
  // The recorded post_out's text, or nullopt when its msg is no attempt.
  static std::optional<std::string> expected_post(const std::string& msg);

  // A POST the replay made that no record holds (the first), if any.
  std::optional<std::string> unmatched_post() const;

 private:
  replay_player_ptr player_;
  std::shared_ptr<replay_posts> posts_;
  std::string name_;
  std::string slot_prefix_;
  caf::actor supervisor_;
};

}  // namespace waggle
