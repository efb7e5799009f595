#pragma once

// Actor traces (docs/traces.md): what crosses the node's actor
// boundaries, as JSON lines. Actors never know whether they are recorded or
// replayed; they see a trace_port. A trace_recorder writes every crossing to
// a file (WAGGLE_TRACE); a replay's port (actors/replay_player.hpp) answers
// clock and random readings from a trace and ignores the rest.

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>

#include <caf/actor.hpp>

#include "actors/support/env.hpp"
#include "gateway/socket_sink.hpp"
#include "gateway/node_api.hpp"
#include "messages/proto/client_message.hpp"
#include "messages/trace_codec.hpp"

namespace waggle {

inline constexpr int trace_format_version = 1;

// The fields of one record after "seq", "actor" and "kind", built as JSON.
class trace_fields {
 public:
  trace_fields& str(std::string_view key, std::string_view value);
  trace_fields& num(std::string_view key, int64_t value);
  // `json` is already JSON (a message from trace_codec::encode).
  trace_fields& raw(std::string_view key, std::string_view json);
  const std::string& text() const { return out_; }

 private:
  void key(std::string_view k);
  std::string out_;
};

class trace_port {
 public:
  virtual ~trace_port() = default;

  // Readings. Recording: returns the source's value and writes it down.
  // Replay: returns the value the trace holds for this actor's next reading.
  virtual int64_t unix_now(const std::string& actor, const std::function<int64_t()>& source) = 0;
  virtual std::string random_challenge(const std::string& actor,
                                       const std::function<std::string()>& source) = 0;
  virtual steady_time steady_now(const std::string& actor,
                                 const std::function<steady_time()>& source) = 0;

  // Whether the node's shared boundaries (database sessions, timers) are
  // recorded: true for a full trace, false for a sampled one.
  virtual bool node_level() const = 0;
  // Whether this connection's boundaries are recorded.
  virtual bool wants_connection(const std::string& conn) const = 0;
  virtual void record(const std::string& actor, std::string_view kind,
                      const trace_fields& fields) = 0;
  // Names an actor by its address, so records can say who sent a message
  // (a connection's read, as the reader pool takes it); a replay also learns
  // the handles of actors it did not spawn itself (roster actors).
  virtual void spawned(const std::string& actor, const caf::actor& handle) = 0;
  virtual std::string name_of(const caf::actor_addr& who) const = 0;

  // A handler that recorded an input holds the recorder until it returns
  // (trace_section, below), so what it made follows its input in the file
  // with no other actor's record between. True if it is held (release it).
  // A replay records nothing and holds nothing.
  virtual bool hold() { return false; }
  virtual void release() {}

  // A replay that feeds this input itself, at its record (a roster actor's
  // roster_dirty): the message the replayed node sends for it is not acted
  // upon. False when recording, and for traces made before the input was.
  virtual bool feeds_input(std::string_view type) const { return false; }
};

using trace_port_ptr = std::shared_ptr<trace_port>;

// An input's record and what the handler that took it does, made as one
// stretch of the file. Actors run on several threads: without this, another
// actor's input could be recorded between a connection's reply_in and the
// frames it sent for that reply (the reader pool's reader_idle, which the
// reader session sends with the reply), and a strict replay, which expects
// each frame while replaying the last input before it, called the frames too
// early. Other threads' records wait for the section (each waits before the
// thing it records, so the file keeps the order in which things happened).
// Open it before recording the input, for the handler's whole scope.
class trace_section {
 public:
  trace_section(const trace_port_ptr& trace, bool active)
    : trace_(active && trace && trace->hold() ? trace.get() : nullptr) {}
  // For a node-level input (recorded only in a full trace), if `when`.
  explicit trace_section(const node_env& env, bool when = true)
    : trace_section(env.trace, when && env.trace && env.trace->node_level()) {}
  ~trace_section() {
    if (trace_)
      trace_->release();
  }
  trace_section(const trace_section&) = delete;
  trace_section& operator=(const trace_section&) = delete;

 private:
  trace_port* trace_;
};

// Records to a file. Nothing is written until start(): the node's start-up
// checks run before, so a trace begins with a node that serves.
class trace_recorder : public trace_port {
 public:
  // `sample` = 0: a full trace. N > 0: only every N-th connection, and only
  // its own boundaries (docs/traces.md, "Sampled traces").
  trace_recorder(const std::string& path, uint64_t sample);
  ~trace_recorder() override;

  // Writes the header (seq 0) and starts recording. `node_json` describes
  // the node's settings the replay needs (a JSON object).
  void start(const std::string& node_json);
  void flush();

  int64_t unix_now(const std::string& actor, const std::function<int64_t()>& source) override;
  std::string random_challenge(const std::string& actor,
                               const std::function<std::string()>& source) override;
  steady_time steady_now(const std::string& actor,
                         const std::function<steady_time()>& source) override;
  bool node_level() const override { return active_ && sample_ == 0; }
  bool wants_connection(const std::string& conn) const override;
  void record(const std::string& actor, std::string_view kind,
              const trace_fields& fields) override;
  void spawned(const std::string& actor, const caf::actor& handle) override;
  std::string name_of(const caf::actor_addr& who) const override;
  bool hold() override;
  void release() override;

 private:
  bool wants(const std::string& actor) const;

  std::FILE* file_ = nullptr;
  uint64_t sample_ = 0;
  std::atomic<bool> active_{false};
  // Recursive: a section's own records take it again on the same thread.
  std::recursive_mutex mtx_;
  uint64_t seq_ = 0;
  std::chrono::steady_clock::time_point last_flush_{};
  mutable std::mutex names_mtx_;
  std::map<caf::actor_addr, std::string> names_;
};

// The connection's socket, recorded: every frame and close it is sent.
class traced_sink : public socket_sink {
 public:
  traced_sink(socket_sink_ptr inner, trace_port_ptr trace, std::string conn);
  void send_text(std::string frame) override;
  void close(uint16_t code, std::string reason) override;
  void notify_drained(std::function<void(room)> done, std::size_t at_most_bytes) override;
  // Not a frame: passed through unrecorded (the gateway's AUTH deadline).
  void authenticated() override { inner_->authenticated(); }
  // Nor this: the session's frame credit, or it would stop reading for good.
  void frame_handled() override { inner_->frame_handled(); }
  // Nor this (refusal pacing): without it a traced node never paused a flood.
  void pause_reading(std::chrono::milliseconds how_long) override {
    inner_->pause_reading(how_long);
  }

 private:
  socket_sink_ptr inner_;
  trace_port_ptr trace_;
  std::string conn_;
};

// For the actors' handlers: records `msg` (any message type of messages/)
// as `kind` when the node's shared boundaries are being recorded.
template <class Msg>
void trace_node_message(const node_env& env, std::string_view kind, const Msg& msg) {
  if (env.trace && env.trace->node_level())
    env.trace->record(env.actor, kind,
                      trace_fields{}
                        .str("type", trace_codec::name_of<Msg>())
                        .raw("msg", trace_codec::encode(msg)));
}

// POST /events as NIP-98 let it in: the HTTP submit actor's input edge
// (the Authorization header itself is never recorded). Records `in` as
// http_in and wraps `done` so its answer is recorded as http_out, the OK
// frame a socket would get: only requests that have an http_in get an
// http_out, so a trace never holds an answer without its input. Returns `in`.
inline http_event_in trace_http_in(const node_env& env, http_event_in in, int64_t community,
                                   std::function<void(gateway::http_event_reply)>& done) {
  if (!env.trace || !env.trace->node_level())
    return in;
  env.trace->record(env.actor, "http_in",
                    trace_fields{}
                      .num("community", community)
                      .str("auth_pubkey", in.auth_pubkey)
                      .str("text", in.text));
  done = [trace = env.trace, name = env.actor, inner = std::move(done)](
           gateway::http_event_reply r) {
    trace->record(name, "http_out",
                  trace_fields{}.str("text", proto::render_ok(r.id, r.accepted, r.message)));
    inner(std::move(r));
  };
  return in;
}

// A replayed actor takes a database session's reply off its mailbox: when,
// not what (the session recorded what). A replay delivers each reply at this
// point, so it reaches its actor in the order the live actor saw it.
// `from` is the session that answered (the current sender of the reply).
template <class Reply>
void trace_reply_in(const node_env& env, const caf::strong_actor_ptr& from, const Reply&) {
  if (env.trace && env.trace->node_level())
    env.trace->record(env.actor, "reply_in",
                      trace_fields{}
                        .str("type", trace_codec::name_of<Reply>())
                        .str("from", from ? env.trace->name_of(from->address()) : std::string{}));
}

// A response handler that records the moment its reply is taken (reply_in,
// above), then runs `fn(reply)`, in one trace_section. State methods take
// session replies only through this, so they carry no trace calls of their own.
template <class Reply, class Self, class Fn>
auto traced_reply(Self* self, const node_env& env, Fn fn) {
  return [self, env = &env, fn = std::move(fn)](Reply& reply) mutable {
    trace_section section{*env};
    trace_reply_in(*env, self->current_sender(), reply);
    fn(reply);
  };
}

// Ingest takes an event: from whom and which, in ingest's own order of events
// and replies. Batches depend on it, so a replay hands ingest its requests in
// this order.
inline void trace_ingest_in(const node_env& env, const caf::strong_actor_ptr& from,
                            const ingest_request& req) {
  if (env.trace && env.trace->node_level())
    env.trace->record(env.actor, "ingest_in",
                      trace_fields{}
                        .str("from", from ? env.trace->name_of(from->address()) : std::string{})
                        .str("id", req.ev ? req.ev->id : std::string{}));
}

// The reader pool takes a read: from whom and which kind, in its own order,
// so a replay hands it the reads in the live order and they reach the same
// sessions (it deals them out round-robin).
template <class Req>
void trace_reader_in(const node_env& env, const caf::strong_actor_ptr& from, const Req&) {
  if (env.trace && env.trace->node_level())
    env.trace->record(env.actor, "reader_in",
                      trace_fields{}
                        .str("from", from ? env.trace->name_of(from->address()) : std::string{})
                        .str("type", trace_codec::name_of<Req>()));
}

// A database session's handler, recorded: the request, then its reply.
template <class Req, class Fn>
auto traced_exchange(const node_env& env, const Req& req, Fn&& fn) {
  trace_node_message(env, "db_request", req);
  auto reply = fn();
  trace_node_message(env, "db_reply", reply);
  return reply;
}

}  // namespace waggle
