#include "actors/replay/replay_player.hpp"

#include <algorithm>
#include <charconv>
#include <type_traits>

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
  consumed_[r.seq] = last_fed;
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
  names_[handle.address()] = actor;
}

std::string replay_player::name_of(const caf::actor_addr& who) const {
  auto i = names_.find(who);
  return i != names_.end() ? i->second : std::string{};
}

std::optional<caf::actor> replay_player::spawned_actor(const std::string& name) const {
  if (auto i = spawned_.find(name); i != spawned_.end())
    return i->second;
  return std::nullopt;
}

void replay_player::deliver(const std::string& name, uint64_t index, const std::string& json) {
  auto& s = stubs[name];
  if (index >= s.held.size())
    return;  // the driver checked before sending
  auto& h = s.held[index];
  rapidjson::Document doc;
  doc.Parse(json.data(), json.size());
  if (doc.HasParseError() || !h.deliver(doc))
    diverge({current_seq, name, "db_reply", json, "a " + h.reply_type + " cannot be read from it"});
  h.deliver = nullptr;  // drops the promise
  // No reader_idle here: the trace records when the pool took it
  // ("reader_idle"), and the replay feeds it there (trace_replay.cpp).
}

replay_db_stub_actor::behavior_type replay_db_stub(replay_db_stub_actor::pointer self,
                                                   replay_player_ptr player, std::string name) {
  auto& p = *player;
  return {
    [self, &p, name](write_batch_request& r) { return p.hold<write_batch_reply>(self, name, r); },
    [self, &p, name](fence_probe_request& r) { return p.hold<fence_probe_reply>(self, name, r); },
    [self, &p, name](history_request& r) { return p.hold<history_reply>(self, name, r); },
    [self, &p, name](count_request& r) { return p.hold<count_reply>(self, name, r); },
    [self, &p, name](sync_items_request& r) { return p.hold<sync_items_reply>(self, name, r); },
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
    // The delivery store (delivery_replay.hpp): claims and completions.
    [self, &p, name](delivery_claim_request& r) {
      return p.hold<delivery_claim_reply>(self, name, r);
    },
    [self, &p, name](delivery_complete_request& r) {
      return p.hold<delivery_complete_reply>(self, name, r);
    },
    [self, &p, name](delivery_complete_batch& r) {
      return p.hold<delivery_complete_batch_reply>(self, name, r);
    },
    [self, &p, name](const reader_attach& a) {
      p.stubs[name].pool = caf::actor_cast<caf::actor>(self->current_sender());
      p.stubs[name].pool_index = a.index;
    },
    // Promises are delivered from inside the actor that made them.
    [player, name](caf::atom_value, uint64_t index, const std::string& json) {
      player->deliver(name, index, json);
    },
  };
}

replay_ingest_gate_actor::behavior_type replay_ingest_gate(
  replay_ingest_gate_actor::stateful_pointer<ingest_gate_state> self, ingest_actor ingest,
  replay_player_ptr player, bool hold_answers) {
  self->state.hold_answers = hold_answers;
  return {
    // Never sent to the gate in a replay (the driver feeds ingest its timer
    // and gate cache itself); passed on, as an ingest in front of ingest.
    [self, ingest](fence_probe_request& req) { return self->delegate(ingest, req); },
    [self, ingest](ingest_tick& tick) { self->send(ingest, tick); },
    [self, ingest](push_gate_loaded& msg) { self->send(ingest, std::move(msg)); },
    [self, ingest](push_gate_attach& msg) { self->send(ingest, std::move(msg)); },
    [self, ingest](cluster_gate_loaded& msg) { self->send(ingest, std::move(msg)); },
    [self, ingest](push_gate_remote& req) { return self->delegate(ingest, req); },
    [self, player](ingest_request& req) {
      auto from = player->name_of(self->current_sender());
      ++player->gate_held["ingest takes " + (req.ev ? req.ev->id : std::string{}) + " from " + from];
      auto promise = self->make_response_promise<ingest_reply>();
      self->state.held_requests.push_back({std::move(from), std::move(req), promise});
      return promise;
    },
    // Matched by sender and id: two connections may send the same event.
    [self, ingest, player](caf::atom_value what, const std::string& from, const std::string& id) {
      if (what == caf::atom("answer")) {
        auto& answers = self->state.held_answers;
        auto i = std::find_if(answers.begin(), answers.end(),
                              [&](const auto& a) { return a.to == from && a.id == id; });
        if (i == answers.end()) {
          player->divergence_if_none({player->current_seq, from, "reply_in",
                                      from + " takes ingest's answer to " + id,
                                      "ingest has not answered it in the replay"});
          return;
        }
        auto a = std::move(*i);
        answers.erase(i);
        std::visit([&](auto& answer) { a.promise.deliver(std::move(answer)); }, a.answer);
        return;
      }
      auto& held = self->state.held_requests;
      auto i = std::find_if(held.begin(), held.end(), [&](const auto& h) {
        // (Traces before the sender was recorded match by id alone.)
        return (from.empty() || h.from == from) && (h.req.ev ? h.req.ev->id : std::string{}) == id;
      });
      if (i == held.end()) {
        player->divergence_if_none({player->current_seq, "ingest", "ingest_in",
                                    "ingest takes " + id + " from " + from,
                                    "no such event was sent in the replay"});
        return;
      }
      auto h = std::move(*i);
      held.erase(i);
      auto key = "ingest takes " + (h.req.ev ? h.req.ev->id : std::string{}) + " from " + h.from;
      if (--player->gate_held[key] == 0)
        player->gate_held.erase(key);
      // Only connections record where they took the answer (not POST /events).
      bool hold = self->state.hold_answers && h.from.rfind("conn-", 0) == 0;
      auto settle = [self, hold, to = h.from, id, promise = h.promise](auto answer) mutable {
        if (hold)
          self->state.held_answers.push_back({to, id, std::move(answer), promise});
        else
          promise.deliver(std::move(answer));
      };
      self->request(ingest, caf::infinite, std::move(h.req))
        .then([settle](ingest_reply& reply) mutable { settle(std::move(reply)); },
              [settle](caf::error& err) mutable { settle(std::move(err)); });
    },
  };
}

replay_reader_gate_actor::behavior_type replay_reader_gate(
  replay_reader_gate_actor::stateful_pointer<reader_gate_state> self, reader_pool_actor pool,
  replay_player_ptr player) {
  // Delegated when forwarded: the pool and the session see the connection
  // as the sender, as they did live.
  auto hold = [self, player, pool](auto req, auto reply) {
    auto from = player->name_of(self->current_sender());
    auto type = trace_codec::name_of<decltype(req)>();
    // A history read waits for the hub's ack, which the replay delivers at
    // once; live, a connection closed before the ack never sent it. Only
    // reads a frame causes directly count as left over.
    if (std::string_view{type} != "history_request")
      ++player->gate_held["the reader pool takes a " + std::string{type} + " from " + from];
    // Made after the sender is named: the promise takes the sender over.
    auto promise = self->template make_response_promise<typename decltype(reply)::type>();
    self->state.held_reads.push_back(
      {std::move(from), type,
       [promise, pool, req = std::move(req)]() mutable { promise.delegate(pool, std::move(req)); }});
    return promise;
  };
  auto flush_withdraws = [self] {
    auto& w = self->state.held_withdraws;
    for (auto i = w.begin(); i != w.end();) {
      if (i->reads_ahead == 0) {
        i->forward();
        i = w.erase(i);
      } else {
        ++i;
      }
    }
  };
  return {
    [pool](caf::atom_value, uint64_t index) { caf::anon_send(pool, reader_idle{index}); },
    // Never sent to the gate (reader sessions report to the pool that
    // attached them); passed on, as a pool in front of the pool.
    [self, pool](reader_idle& msg) { self->send(pool, msg); },
    [hold](history_request& req) {
      return hold(std::move(req), std::type_identity<history_reply>{});
    },
    [hold](count_request& req) { return hold(std::move(req), std::type_identity<count_reply>{}); },
    [hold](sync_items_request& req) {
      return hold(std::move(req), std::type_identity<sync_items_reply>{});
    },
    [hold](access_request& req) { return hold(std::move(req), std::type_identity<access_reply>{}); },
    [self, player, pool, flush_withdraws](read_withdraw& msg) {
      auto from = player->name_of(self->current_sender());
      auto& held = self->state.held_reads;
      auto ahead = static_cast<size_t>(
        std::count_if(held.begin(), held.end(), [&](const auto& h) { return h.from == from; }));
      auto sender = self->current_sender();
      self->state.held_withdraws.push_back(
        {from, ahead, [self, sender, pool, msg = std::move(msg)]() mutable {
           caf::send_as(caf::actor_cast<caf::actor>(sender), pool, std::move(msg));
         }});
      flush_withdraws();
    },
    [self, player, flush_withdraws](caf::atom_value, const std::string& from,
                                    const std::string& type) {
      auto& held = self->state.held_reads;
      auto i = std::find_if(held.begin(), held.end(),
                            [&](const auto& h) { return h.from == from && h.type == type; });
      if (i == held.end()) {
        player->divergence_if_none({player->current_seq, "reader_pool", "reader_in",
                                    "the pool takes a " + type + " of " + from,
                                    "no such read was sent in the replay"});
        return;
      }
      auto h = std::move(*i);
      held.erase(i);
      auto key = "the reader pool takes a " + h.type + " from " + h.from;
      if (auto k = player->gate_held.find(key); k != player->gate_held.end() && --k->second == 0)
        player->gate_held.erase(k);
      h.forward();
      for (auto& w : self->state.held_withdraws)
        if (w.from == h.from && w.reads_ahead > 0)
          --w.reads_ahead;
      flush_withdraws();
    },
  };
}

std::string replay_sink::close_text(int64_t code, const std::string& reason) {
  return "close " + std::to_string(code) + " " + reason;
}

void replay_sink::send_text(std::string frame) {
  player_->produce_frame(conn_, std::move(frame));
}

void replay_sink::close(uint16_t code, std::string reason) {
  player_->produce_frame(conn_, close_text(code, reason));
}

}  // namespace waggle
