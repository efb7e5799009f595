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
#include <vector>

#include <caf/event_based_actor.hpp>
#include <rapidjson/document.h>

#include "actors/trace_recorder.hpp"
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
  };
  struct pending_reply {
    std::string type;  // the reply type the requester waits for
    std::function<bool(const rapidjson::Value&)> deliver;  // false: the JSON is not that type
  };
  // One database session stand-in: what the replay asked it, and the
  // promises it holds until the trace says the reply came.
  struct stub {
    std::vector<request> requests;
    size_t requests_checked = 0;
    std::deque<pending_reply> pending;
    size_t replies_sent = 0;  // handed to the stub, in order
  };

  // -- trace_port -----------------------------------------------------------
  int64_t unix_now(const std::string& actor, const std::function<int64_t()>& source) override;
  std::string random_challenge(const std::string& actor,
                               const std::function<std::string()>& source) override;
  steady_time steady_now(const std::string& actor,
                         const std::function<steady_time()>& source) override;
  bool node_level() const override { return false; }
  bool wants_connection(const std::string&) const override { return false; }
  void record(const std::string&, std::string_view, const trace_fields&) override {}
  void spawned(const std::string& actor, const caf::actor& handle) override;

  // -- set up by the driver ---------------------------------------------------
  void add_reading(const std::string& actor, reading r) { readings_[actor].push_back(std::move(r)); }
  bool consumed(uint64_t seq) const { return consumed_.count(seq) > 0; }
  std::optional<caf::actor> spawned_actor(const std::string& name) const;

  // -- what the replayed actors did -------------------------------------------
  std::map<std::string, std::deque<std::string>> frames;  // per connection, unchecked
  std::map<std::string, stub> stubs;

  template <class Rep, class Req>
  caf::typed_response_promise<Rep> hold(caf::event_based_actor* self, const std::string& name,
                                        const Req& req) {
    auto promise = self->make_response_promise<Rep>();
    auto& s = stubs[name];
    s.requests.push_back({trace_codec::name_of<Req>(), trace_codec::encode(req)});
    s.pending.push_back({trace_codec::name_of<Rep>(),
                         [promise](const rapidjson::Value& v) mutable {
                           Rep rep;
                           if (!trace_codec::decode(v, rep))
                             return false;
                           promise.deliver(std::move(rep));
                           return true;
                         }});
    return promise;
  }
  // Inside the stub: answers its oldest held request with the recorded reply.
  void deliver(const std::string& name, const std::string& json);

  // The first divergence found while the actors ran (readings, replies).
  std::optional<trace_divergence> divergence;
  uint64_t current_seq = 0;  // the input being replayed, for divergences found meanwhile

 private:
  std::optional<reading> next_reading(const std::string& actor, const char* what);
  void diverge(trace_divergence d);

  std::map<std::string, std::deque<reading>> readings_;
  std::set<uint64_t> consumed_;
  std::map<std::string, caf::actor> spawned_;
};

using replay_player_ptr = std::shared_ptr<replay_player>;

// A database session stand-in (writer, reader or group session: it takes
// every request type of the three). Requests go to the player; replies come
// when the driver sends ("deliver", json).
caf::behavior replay_db_stub(caf::event_based_actor* self, replay_player_ptr player,
                             std::string name);

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
