#pragma once

// Ingest: the writer pool with group commit (docs/write-path.md). It queues incoming
// events and, whenever a writer session is idle, hands it everything queued
// (up to max_batch) as ONE transaction. A lone client never waits on a timer:
// its batch is one event and adds no latency, and under load batches grow by
// themselves while the writers are busy. Between the two, when several
// connections publish at once but not fast enough to keep the writers busy,
// every event would still pay a whole transaction; there ingest holds a batch
// until its oldest event has waited commit_delay (or the batch is full), as
// PostgreSQL's commit_delay/commit_siblings do for WAL flushes
// (docs/write-path.md, docs/benchmarks.md). Each sender hears back only after its
// batch committed; committed events then go to the fanout hub.

#include <array>
#include <chrono>
#include <deque>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "actors/ingest/push_gate_cache.hpp"
#include "actors/support/env.hpp"
#include "messages/interfaces.hpp"

namespace waggle {

struct ingest_settings {
  size_t max_batch = 512;
  size_t max_queue = 20000;  // beyond this, events are answered "error: ingest queue full"
  // Hold a batch up to this long for more events (0 = never) ...
  std::chrono::microseconds commit_delay{2000};
  // ... but only while at least this many authors (event pubkeys) have sent
  // events within the last 10 x commit_delay. Authors, not sender actors:
  // POST /events spawns an actor per request, and one author's stream, on
  // any transport, is one publisher. 2..32 (the arrivals remembered).
  size_t commit_siblings = 4;
  // The push gate cache (docs/push.md): push off, no batch runs the gate;
  // cache off, every batch runs it for every community.
  bool push_enabled = true;
  bool push_gate_cache = true;
  // A clustered node with the cache: a lease is written only after every
  // other node gates its community (push_gate_relay), and the cache loads
  // from the relay, not the matcher (docs/push.md, "Several nodes").
  bool cluster_gate = false;
  // A lease whose cluster confirmation is older than this when its turn
  // comes is refused (retry): the intents a starting node loads are only
  // read back ten minutes (migrations/0014).
  std::chrono::seconds gate_confirmation_ttl{60};
};

struct ingest_state;
using ingest_ptr = ingest_actor::stateful_pointer<ingest_state>;

struct ingest_state {
  static inline const char* name = "ingest";

  using time_point = steady_time;  // from node_env, so a replay is exact
  struct pending {
    ingest_item item;
    caf::typed_response_promise<ingest_reply> promise;
    time_point queued_at;
    bool lease = false;  // a push lease: written alone, behind the barrier
    // A clustered lease: what the other nodes stored ungated, and when they
    // confirmed they gate its community.
    std::vector<std::string> remote_skipped;
    time_point confirmed_at{};
  };
  // Another node's lease waits for the batches in flight when it asked.
  struct gate_drain {
    int64_t community_id = 0;
    std::set<caf::actor_addr> writers;
    caf::typed_response_promise<push_gate_drained> promise;
  };
  // A batch a writer is running, and what it was told about the push gate.
  struct flight {
    std::vector<pending> items;
    push_gate_cache::decision gate;
  };
  struct arrival {
    std::string author;  // pubkey hex; "" = unused slot
    time_point at;
  };

  ingest_ptr self = nullptr;
  ingest_settings settings;
  node_env env;
  hub_actor hub;
  std::vector<writer_session_actor> all_writers;
  std::vector<writer_session_actor> idle_writers;
  std::deque<pending> queue;
  // Batches a writer is running, by writer: answered on its reply, or failed
  // if the writer dies (its commit outcome is then unknown).
  std::map<caf::actor_addr, flight> in_flight;
  push_gate_cache gate;
  // The last arrivals, for counting the authors publishing right now.
  static constexpr size_t remembered = 32;
  std::array<arrival, remembered> recent{};
  size_t recent_next = 0;
  bool hold_armed = false;  // an ingest_tick is on its way
  push_gate_relay_actor gate_relay;  // set by the relay on a clustered node
  std::vector<gate_drain> drains;

  void init(ingest_ptr self_ptr, ingest_settings s, std::vector<writer_session_actor> writers,
            hub_actor h, node_env e);
  caf::typed_response_promise<ingest_reply> on_request(ingest_request& req);
  void on_tick();
  caf::typed_response_promise<fence_probe_reply> on_fence_probe();
  void on_gate_loaded(const push_gate_loaded& loaded);
  void on_cluster_gate_loaded(const cluster_gate_loaded& loaded);
  caf::typed_response_promise<push_gate_drained> on_gate_remote(const push_gate_remote& req);
  void on_exit(const caf::exit_msg& msg);

  void note_arrival(const std::string& author, time_point now);
  // True when the queued batch should wait for more events (see above).
  bool should_hold(time_point now) const;

  // Answers every held request "failed" (never a false OK).
  void fail_everything(const std::string& reason);

 private:
  void dispatch();
  void dispatch_lease();
  void ask_cluster(pending lease);
  void settle_drains(const caf::actor_addr& finished);
  void on_batch_done(writer_session_actor writer, write_batch_reply reply);
};

// `writers` are the writer sessions, each owning one connection.
ingest_actor::behavior_type ingest_actor_impl(ingest_ptr self, ingest_settings settings,
                                              std::vector<writer_session_actor> writers,
                                              hub_actor hub, node_env env);

}  // namespace waggle
