#pragma once

// Ingest: the writer pool with group commit (DESIGN §4). It queues incoming
// events and, whenever a writer session is idle, hands it everything queued
// (up to max_batch) as ONE transaction. There is no timer: at low load a
// batch is one event and adds no latency; under load batches grow by
// themselves while the writers are busy. Each sender hears back only after
// its batch committed; committed events then go to the fanout hub.

#include <chrono>
#include <deque>
#include <map>
#include <vector>

#include "actors/env.hpp"
#include "messages/interfaces.hpp"

namespace waggle {

struct ingest_settings {
  size_t max_batch = 512;
  size_t max_queue = 20000;  // beyond this, events are refused as rate-limited
};

struct ingest_state {
  struct pending {
    db::ingest_item item;
    caf::typed_response_promise<ingest_reply> promise;
  };

  ingest_settings settings;
  node_env env;
  hub_actor hub;
  std::vector<writer_actor> all_writers;
  std::vector<writer_actor> idle_writers;
  std::deque<pending> queue;
  // Batches a writer is running, by writer: answered on its reply, or failed
  // if the writer dies (its commit outcome is then unknown).
  std::map<caf::actor_addr, std::vector<pending>> in_flight;

  // Answers every held request "failed" (never a false OK).
  void fail_everything(const std::string& reason);

  static inline const char* name = "ingest";
};

using ingest_ptr = ingest_actor::stateful_pointer<ingest_state>;

// `writers` are the writer sessions, each owning one connection.
ingest_actor::behavior_type ingest_actor_impl(ingest_ptr self, ingest_settings settings,
                                              std::vector<writer_actor> writers, hub_actor hub,
                                              node_env env);

}  // namespace waggle
