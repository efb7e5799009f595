#include "actors/replay_player.hpp"

#include <charconv>

#include <caf/atom.hpp>

namespace waggle {

std::string trace_divergence::to_string() const {
  std::string out = seq ? "diverged at seq " + std::to_string(seq) : "diverged after the last record";
  out += " (" + actor + ", " + kind + ")\n  recorded: " + recorded + "\n  replayed: " + replayed;
  return out;
}

void replay_player::diverge(trace_divergence d) {
  if (!divergence)
    divergence = std::move(d);
}

std::optional<replay_player::reading> replay_player::next_reading(const std::string& actor,
                                                          const char* what) {
  auto& queue = readings_[actor];
  if (queue.empty()) {
    diverge({current_seq, actor, "reading", "no further reading by " + actor,
             std::string{"read "} + what});
    return std::nullopt;
  }
  if (queue.front().what != what) {
    diverge({queue.front().seq, actor, "reading", "read " + queue.front().what,
             std::string{"read "} + what});
    return std::nullopt;
  }
  auto r = std::move(queue.front());
  queue.pop_front();
  consumed_.insert(r.seq);
  return r;
}

namespace {

int64_t to_int(const std::string& text) {
  int64_t v = 0;
  std::from_chars(text.data(), text.data() + text.size(), v);
  return v;
}

}  // namespace

int64_t replay_player::unix_now(const std::string& actor, const std::function<int64_t()>&) {
  auto r = next_reading(actor, "unix_now");
  return r ? to_int(r->value) : 0;
}

std::string replay_player::random_challenge(const std::string& actor,
                                            const std::function<std::string()>&) {
  auto r = next_reading(actor, "random");
  return r ? r->value : std::string{};
}

steady_time replay_player::steady_now(const std::string& actor,
                                      const std::function<steady_time()>&) {
  auto r = next_reading(actor, "steady_ns");
  return steady_time{std::chrono::nanoseconds{r ? to_int(r->value) : 0}};
}

void replay_player::spawned(const std::string& actor, const caf::actor& handle) {
  spawned_[actor] = handle;
}

std::optional<caf::actor> replay_player::spawned_actor(const std::string& name) const {
  if (auto i = spawned_.find(name); i != spawned_.end())
    return i->second;
  return std::nullopt;
}

void replay_player::deliver(const std::string& name, const std::string& json) {
  auto& s = stubs[name];
  if (s.pending.empty())
    return;  // the driver checked before sending; nothing to answer
  auto p = std::move(s.pending.front());
  s.pending.pop_front();
  rapidjson::Document doc;
  doc.Parse(json.data(), json.size());
  if (doc.HasParseError() || !p.deliver(doc))
    diverge({current_seq, name, "db_reply", json, "a " + p.type + " cannot be read from it"});
}

caf::behavior replay_db_stub(caf::event_based_actor* self, replay_player_ptr player,
                             std::string name) {
  auto& p = *player;
  return {
    [self, &p, name](write_batch_request& r) { return p.hold<write_batch_reply>(self, name, r); },
    [self, &p, name](fence_probe_request& r) { return p.hold<fence_probe_reply>(self, name, r); },
    [self, &p, name](history_request& r) { return p.hold<history_reply>(self, name, r); },
    [self, &p, name](count_request& r) { return p.hold<count_reply>(self, name, r); },
    [self, &p, name](access_request& r) { return p.hold<access_reply>(self, name, r); },
    [self, &p, name](group_command_request& r) {
      return p.hold<group_command_reply>(self, name, r);
    },
    [self, &p, name](roster_publish_request& r) {
      return p.hold<roster_publish_reply>(self, name, r);
    },
    [self, &p, name](roster_repair_request& r) {
      return p.hold<roster_repair_reply>(self, name, r);
    },
    // Promises are delivered from inside the actor that made them.
    [player, name](caf::atom_value, const std::string& json) { player->deliver(name, json); },
  };
}

std::string replay_sink::close_text(int64_t code, const std::string& reason) {
  return "close " + std::to_string(code) + " " + reason;
}

void replay_sink::send_text(std::string frame) {
  player_->frames[conn_].push_back(std::move(frame));
}

void replay_sink::close(uint16_t code, std::string reason) {
  player_->frames[conn_].push_back(close_text(code, reason));
}

}  // namespace waggle
