#pragma once

// The replay side of a trace (docs/traces.md): the trace_port the replayed
// actors see, the stand-ins for the database sessions, and the socket sink
// of each replayed connection. The player holds what the trace says the
// boundaries did (readings to hand out) and collects what the replayed
// actors do there (frames out, database requests), so the driver
// (actors/trace_replay.cpp) can compare the two record by record.

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <variant>
#include <vector>

#include <caf/event_based_actor.hpp>
#include <caf/stateful_actor.hpp>
#include <rapidjson/document.h>

#include "actors/trace/trace_recorder.hpp"
#include "messages/interfaces.hpp"
#include "messages/trace_codec.hpp"

namespace waggle {

// Where a replay went another way than the recording.
struct trace_divergence {
  uint64_t seq = 0;       // the trace record at which it showed (0: after the last one)
  std::string actor;      // whose boundary ("conn-2", "writer-0", "ingest")
  std::string kind;       // the record kind ("frame_out", "db_request", "reading", ...)
  std::string recorded;   // what the trace holds there
  std::string replayed;   // what the replay did instead
  std::string to_string() const;
};

class replay_player : public trace_port {
 public:
  struct reading {
    uint64_t seq = 0;
    std::string what;   // "unix_now", "random", "steady_ns"
    std::string value;  // as text; numbers in decimal
  };
  struct request {
    std::string type;  // "write_batch_request"
    std::string msg;   // trace_codec JSON
    // Whether a recorded request's JSON is this one: equal, or equal once
    // read as the request type and written again, so a trace recorded
    // before a field was added (the decoder leaves it at its default)
    // matches a replay that sends that default.
    std::function<bool(const std::string&)> same_as;
  };
  // A request the stand-in holds, with its response promise.
  struct held_request {
    std::string requester;   // the replayed actor that asked ("conn-2", "ingest")
    std::string reply_type;  // what it waits for
    std::function<bool(const rapidjson::Value&)> deliver;  // false: the JSON is not that type
    bool delivered = false;
  };
  // The trace's reply to one request: its record, its message, and the
  // replay's request it answers.
  struct ready_reply {
    uint64_t seq = 0;
    std::string msg;
    size_t held_index = 0;
  };
  // One database session stand-in. Two actors' requests can reach a session
  // in either order, so each request the trace shows the session starting
  // (db_request) is matched by content to one the replay made (order[k]);
  // a session answers in the order it started, so the trace's k-th reply
  // answers order[k]. It is delivered when the trace says the requester
  // took it (a "reply_in" record).
  struct stub {
    std::vector<request> requests;  // index-aligned with held
    std::vector<bool> matched;
    std::vector<held_request> held;
    std::vector<size_t> order;
    std::vector<ready_reply> ready;
    size_t first_undelivered = 0;  // into ready: those before it are delivered
    // A reader stub: the pool that attached it, told reader_idle after each
    // read it answers (as a live session does).
    caf::actor pool;
    uint64_t pool_index = 0;
  };

  // -- trace_port -----------------------------------------------------------
  int64_t unix_now(const std::string& actor, const std::function<int64_t()>& source) override;
  std::string random_challenge(const std::string& actor,
                               const std::function<std::string()>& source) override;
  steady_time steady_now(const std::string& actor,
                         const std::function<steady_time()>& source) override;
  bool node_level() const override { return false; }
  bool wants_connection(const std::string&) const override { return false; }
  bool feeds_input(std::string_view type) const override {
    return fed_inputs.count(std::string{type}) > 0;
  }
  std::set<std::string> fed_inputs;  // set from the trace before the replay starts
  void record(const std::string&, std::string_view, const trace_fields&) override {}
  void spawned(const std::string& actor, const caf::actor& handle) override;
  std::string name_of(const caf::actor_addr& who) const override;

  // -- set up by the driver ---------------------------------------------------
  void add_reading(const std::string& actor, reading r) { readings_[actor].push_back(std::move(r)); }
  std::optional<caf::actor> spawned_actor(const std::string& name) const;

  // -- what the replayed actors did -------------------------------------------
  // Each output remembers the input being replayed when it was made, for the
  // strict check (an output the live node made later must not come earlier).
  struct produced_frame {
    std::string text;
    uint64_t during = 0;
  };
  std::map<std::string, std::deque<produced_frame>> frames;  // per connection, unchecked
  void produce_frame(const std::string& stream, std::string text) {
    frames[stream].push_back({std::move(text), last_fed});
  }
  // The seq of the last input fed (the driver sets it).
  uint64_t last_fed = 0;
  // When the reading recorded at `seq` was taken (the input being fed), if it was.
  std::optional<uint64_t> taken_during(uint64_t seq) const {
    if (auto i = consumed_.find(seq); i != consumed_.end())
      return i->second;
    return std::nullopt;
  }
  std::map<std::string, stub> stubs;

  template <class Rep, class Req>
  caf::typed_response_promise<Rep> hold(caf::local_actor* self, const std::string& name,
                                        const Req& req) {
    auto requester = name_of(self->current_sender());
    auto promise = self->make_response_promise<Rep>();
    auto& s = stubs[name];
    auto json = trace_codec::encode(req);
    auto same_as = [json](const std::string& recorded) {
      if (recorded == json)
        return true;
      rapidjson::Document doc;
      doc.Parse(recorded.data(), recorded.size());
      Req back;
      return !doc.HasParseError() && trace_codec::decode(doc, back)
             && trace_codec::encode(back) == json;
    };
    s.requests.push_back({trace_codec::name_of<Req>(), std::move(json), std::move(same_as)});
    s.matched.push_back(false);
    s.held.push_back({std::move(requester), trace_codec::name_of<Rep>(),
                      [promise](const rapidjson::Value& v) mutable {
                        Rep rep;
                        if (!trace_codec::decode(v, rep))
                          return false;
                        promise.deliver(std::move(rep));
                        return true;
                      }});
    return promise;
  }
  // Inside the stub: answers its request `index` with the recorded reply.
  void deliver(const std::string& name, uint64_t index, const std::string& json);

  // Replayed actors by address, so a stand-in knows who asked.
  void name(const caf::actor_addr& who, std::string actor) { names_[who] = std::move(actor); }
  std::string name_of(const caf::strong_actor_ptr& who) const {
    return who ? name_of(who->address()) : std::string{};
  }

  // What the gates hold: a message the replay sent that the live actor never
  // took is a divergence at the end (an event submitted twice, say).
  std::map<std::string, size_t> gate_held;  // "ingest: <id> from conn-2" -> count

  // The first divergence found while the actors ran (readings, replies).
  std::optional<trace_divergence> divergence;
  void divergence_if_none(trace_divergence d) { diverge(std::move(d)); }
  uint64_t current_seq = 0;  // the input being replayed, for divergences found meanwhile

 private:
  std::optional<reading> next_reading(const std::string& actor, const char* what);
  void diverge(trace_divergence d);

  std::map<std::string, std::deque<reading>> readings_;
  std::map<uint64_t, uint64_t> consumed_;  // reading seq -> the input fed meanwhile
  std::map<std::string, caf::actor> spawned_;
  std::map<caf::actor_addr, std::string> names_;
};

using replay_player_ptr = std::shared_ptr<replay_player>;

// A database session stand-in (writer, reader or group session, or the
// delivery store: it takes every request type of the four). Requests go to the player; replies come
// when the driver sends ("deliver", index, json). Its interface is the union of the four, so
// its handle is each of theirs without a cast.
using replay_db_stub_actor = caf::typed_actor<
  caf::replies_to<write_batch_request>::with<write_batch_reply>,
  caf::replies_to<fence_probe_request>::with<fence_probe_reply>,
  caf::replies_to<history_request>::with<history_reply>,
  caf::replies_to<count_request>::with<count_reply>,
  caf::replies_to<sync_items_request>::with<sync_items_reply>,
  caf::replies_to<access_request>::with<access_reply>,
  caf::replies_to<group_command_request>::with<group_command_reply>,
  caf::replies_to<roster_publish_request>::with<roster_publish_reply>,
  caf::replies_to<roster_repair_request>::with<roster_repair_reply>,
  caf::replies_to<delivery_claim_request>::with<delivery_claim_reply>,
  caf::replies_to<delivery_complete_request>::with<delivery_complete_reply>,
  caf::replies_to<delivery_complete_batch>::with<delivery_complete_batch_reply>,
  caf::reacts_to<reader_attach>,
  caf::reacts_to<caf::atom_value, uint64_t, std::string>>;
replay_db_stub_actor::behavior_type replay_db_stub(replay_db_stub_actor::pointer self,
                                                   replay_player_ptr player, std::string name);

// Stands in front of the replayed ingest: it keeps every ingest_request
// until the driver sends ("forward", sender, event id), the point at which the live
// ingest took that event (an "ingest_in" record), so the replayed ingest sees
// events and writer replies in the live order and forms the same batches.
// With `hold_answers` (the trace records where each connection took ingest's
// answer, a connection's "reply_in" of an ingest_reply) it also keeps ingest's
// answer to a connection until the driver sends ("answer", connection, event id).
struct ingest_gate_state {
  struct held {
    std::string from;  // the sender's name
    ingest_request req;
    caf::typed_response_promise<ingest_reply> promise;
  };
  struct held_answer {
    std::string to;  // the connection's name
    std::string id;  // the event's
    std::variant<ingest_reply, caf::error> answer;
    caf::typed_response_promise<ingest_reply> promise;
  };
  std::deque<held> held_requests;
  bool hold_answers = false;
  std::deque<held_answer> held_answers;
  static inline const char* name = "ingest_gate";
};
// An ingest to its senders (the driver's ("forward", sender, id) besides).
using replay_ingest_gate_actor
  = ingest_actor::extend<caf::reacts_to<caf::atom_value, std::string, std::string>>;
replay_ingest_gate_actor::behavior_type replay_ingest_gate(
  replay_ingest_gate_actor::stateful_pointer<ingest_gate_state> self, ingest_actor ingest,
  replay_player_ptr player, bool hold_answers);

// Stands in front of the replayed reader pool: it keeps each read until the
// driver sends ("forward", from, type), where the live pool took it (a
// "reader_in" record); the pool deals reads out round-robin, so their order
// decides which session serves which.
struct reader_gate_state {
  struct held {
    std::string from;  // the requester's name
    std::string type;
    std::function<void()> forward;  // delegates the read to the pool
  };
  std::deque<held> held_reads;
  // A read_withdraw waits until every read its sender sent before it has
  // been forwarded: live, the pool took those first (one sender's messages
  // keep their order), and the withdrawal must find them queued as it did.
  struct held_withdraw {
    std::string from;
    size_t reads_ahead;  // of this sender's, still held when it arrived
    std::function<void()> forward;
  };
  std::deque<held_withdraw> held_withdraws;
  static inline const char* name = "reader_gate";
};
// A reader pool to its senders (the driver's ("idle", index) and ("forward",
// from, type) besides).
using replay_reader_gate_actor
  = reader_pool_actor::extend<caf::reacts_to<caf::atom_value, uint64_t>,
                              caf::reacts_to<caf::atom_value, std::string, std::string>>;
replay_reader_gate_actor::behavior_type replay_reader_gate(
  replay_reader_gate_actor::stateful_pointer<reader_gate_state> self, reader_pool_actor pool,
  replay_player_ptr player);

// A replayed connection's socket: frames go to the player.
class replay_sink : public socket_sink {
 public:
  replay_sink(replay_player_ptr player, std::string conn)
    : player_(std::move(player)), conn_(std::move(conn)) {}
  void send_text(std::string frame) override;
  void close(uint16_t code, std::string reason) override;
  // A close as the frame queue shows it: "close <code> <reason>".
  static std::string close_text(int64_t code, const std::string& reason);

 private:
  replay_player_ptr player_;
  std::string conn_;
};

}  // namespace waggle
