#pragma once

// The hub's direct way to a connection's socket for live events
// (docs/architecture.md, "connection actor", "Direct live frames").
//
// At a thousand subscribers a committed event became a thousand live_event
// messages, each scheduling a connection actor that only wrapped the shared
// JSON in a frame; on CAF's LIFO worker queues a publisher's own OK then
// waited behind the whole fanout of its event. Once a subscription is live
// (EOSE sent, nothing held), what the actor does for a live event is a pure
// function of state it can publish here: the subscription's generation and
// the ids its history carried. The hub writes those frames itself, under this
// gate's lock; everything else still goes through the actor.
//
// Order is kept by one rule: nothing is written directly while the actor
// owes the hub an answer (a live_event or a revocation the hub sent it and
// it has not handled yet). So for every subscription, frames reach the socket
// in the hub's order, a revocation is handled by the actor before any event
// the hub fans out after it, and the actor's own frames (EOSE before open(),
// CLOSED after shut()) never cross a direct one.

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "actors/connection/subscription_memory.hpp"
#include "gateway/socket_sink.hpp"

namespace waggle {

class live_gate {
 public:
  explicit live_gate(socket_sink_ptr sink) : sink_(std::move(sink)) {}

  // -- the hub's side (its own thread) ----------------------------------------

  // Writes the event (its shared JSON `raw`) for each of `sub_ids` that is
  // open here at that generation, unless its history carried it, and takes
  // those out of `sub_ids` and `generations`. Returns true when some are
  // left: the hub sends them to the actor, and from this call until the
  // actor has taken them nothing is written directly.
  bool offer(std::vector<std::string>& sub_ids, std::vector<uint64_t>& generations,
             const std::string& event_id, const std::shared_ptr<const std::string>& raw);
  // Before the hub sends the actor a revocation: the same hold, until taken.
  void owe();

  // -- the connection actor's side --------------------------------------------

  // After handling a live_event or a revocation from the hub.
  void taken();
  // After its EOSE and held events went out: live events of `generation`
  // may go direct, except those in `history`.
  void open(const std::string& sub_id, uint64_t generation, history_ids_ptr history);
  // Before the subscription is dropped (CLOSE, replaced, ended).
  void shut(const std::string& sub_id);
  // The actor is gone: nothing more is written.
  void close();

  // For tests: whether a live event would be written directly now.
  bool open_for(const std::string& sub_id, uint64_t generation);

  // More matching subscriptions than this on one connection for one event go
  // through the actor.
  static constexpr size_t max_direct_per_event = 4;

 private:
  struct live_sub {
    uint64_t generation = 0;
    history_ids_ptr history;
    std::shared_ptr<const std::string> head;  // ["EVENT","<sub id>", rendered once
  };
  std::mutex mtx_;
  socket_sink_ptr sink_;
  std::unordered_map<std::string, live_sub> subs_;
  uint64_t owed_ = 0;
  bool closed_ = false;
};

using live_gate_ptr = std::shared_ptr<live_gate>;

}  // namespace waggle
