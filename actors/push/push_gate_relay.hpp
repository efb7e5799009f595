#pragma once

// The push gate across nodes (docs/push.md, "Several nodes"). Each clustered
// node with push and the gate cache on runs one, detached, on a connection
// of its own (a lease is rare; its statements may block):
// - before this node's ingest writes a lease, it records the lease's intent
//   (db::cluster::note_gate_intent), reads the live nodes and asks each, on
//   waggle.node.<id>.gate, to gate the community: their ingest gates it at
//   once and answers when every batch it dispatched before has finished,
//   naming the push events those stored ungated. A node that does not
//   answer fails the lease closed (`error:`, retry);
// - it answers other nodes' asks through its own ingest;
// - it loads the communities to gate into ingest (instead of the matcher)
//   only after re-registering this node, every `reload`: a lease whose
//   registry read missed this node was preceded by an intent that this load
//   sees.

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include <caf/stateful_actor.hpp>
#include <pqxx/connection>

#include "actors/support/env.hpp"
#include "messages/interfaces.hpp"

namespace waggle {

struct push_gate_relay_settings {
  std::string database_url;
  std::string node_id;
  int protocol_version = 1;
  std::chrono::seconds node_ttl{30};
  uint32_t ask_timeout_ms = 2000;
  caf::timespan tick = std::chrono::milliseconds(200);
  caf::timespan reload = std::chrono::seconds(10);
  caf::timespan answer_bound = std::chrono::seconds(10);
};

std::string push_gate_subject(const std::string& node_id);

struct push_gate_relay_state {
  static inline const char* name = "push_gate_relay";
  using ptr = push_gate_relay_actor::stateful_pointer<push_gate_relay_state>;

  ptr self = nullptr;
  bus_actor bus;
  std::function<ingest_actor()> current_ingest;
  push_gate_relay_settings settings;
  node_env env;

  std::unique_ptr<pqxx::connection> conn;
  ingest_actor attached;
  steady_time loaded_at{};
  bool subscribed = false;
  bool subscribing = false;

  void init(ptr self, bus_actor bus, std::function<ingest_actor()> current_ingest,
            push_gate_relay_settings settings, node_env env);
  void on_tick();
  caf::typed_response_promise<cluster_gate_done> on_request(const cluster_gate_request& req);
  void on_message(const bus_message& msg);

 private:
  bool connect();
  void subscribe();
  void load();
};

push_gate_relay_actor::behavior_type push_gate_relay_impl(
  push_gate_relay_state::ptr self, bus_actor bus, std::function<ingest_actor()> current_ingest,
  push_gate_relay_settings settings, node_env env);

}  // namespace waggle
