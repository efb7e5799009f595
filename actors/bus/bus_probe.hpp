#pragma once

// The node's presence on the bus (docs/bus.md, "The node on the bus"), and
// the first node actor that uses it:
// - waggle.node.<id>.ping: a request to this node; answered on its reply_to
//   with {"node":id,"version":...};
// - waggle.cluster.ping, queue group "any": a request to any one node of
//   the cluster, answered the same way by whichever member the bus picks;
// - waggle.node.<id>.probe: every `interval` it publishes probe n there and
//   times its way back (waggle_bus_probe_*); one not back by `deadline` is
//   lost.
//
// Everything that reaches it from the bus (deliveries, lag notices, the
// answers to its publishes and subscribes) and its timers are recorded as
// boundary inputs, and what it sends the bus as outputs (docs/traces.md,
// "The bus"): a replay runs it against a stand-in bus.

#include <chrono>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <caf/stateful_actor.hpp>

#include "actors/support/env.hpp"
#include "messages/interfaces.hpp"

namespace waggle {

struct bus_probe_settings {
  std::string node_id;
  caf::timespan interval = std::chrono::seconds(10);
  // A probe not back by then is lost; at most the interval, so one probe is
  // settled before the next is due.
  caf::timespan deadline = std::chrono::seconds(5);
  // How long it waits for the bus to answer a subscribe or publish (actor
  // rule 9): a bus that never answers must not pile up its waits. The
  // timeout is an error answer like any, recorded and replayed as one.
  caf::timespan answer_bound = std::chrono::seconds(30);
};

// The subjects, by node id (also what `waggle bus request` asks).
std::string bus_ping_subject(const std::string& node_id);
std::string bus_probe_subject(const std::string& node_id);
inline constexpr const char* bus_cluster_ping_subject = "waggle.cluster.ping";
inline constexpr const char* bus_cluster_ping_group = "any";

struct bus_probe_state {
  static inline const char* name = "bus_probe";
  using ptr = bus_probe_actor::stateful_pointer<bus_probe_state>;

  struct subscription {
    std::string subject;
    std::string group;
    uint64_t id = 0;       // the bus's, once subscribed
    bool pending = false;  // asked, not answered
  };

  ptr self = nullptr;
  bus_actor bus;
  bus_probe_settings settings;
  node_env env;
  // Indexed by the slots below.
  enum slot : size_t { ping_slot, cluster_ping_slot, probe_slot };
  std::vector<subscription> subscriptions;
  // Every request to the bus, numbered from 1 in the order sent: a trace
  // pairs each answer with its request by this number (bus_out, bus_reply).
  uint64_t requests = 0;
  std::map<uint64_t, steady_time> in_flight;  // probe n -> published at

  void init(ptr self, bus_actor bus, bus_probe_settings settings, node_env env);
  void on_message(const bus_message& msg);
  void on_tick(uint64_t n);
  void on_deadline(uint64_t n);

 private:
  void start();
  void subscribe_missing();
  void answer_ping(const bus_message& msg);
  void probe_back(const bus_message& msg);
  // Sends `msg` to the bus, recorded as an output; `done(reply)` or
  // `failed(error)` runs with the answer, recorded as an input.
  template <class Reply, class Msg, class Done, class Failed>
  void ask(Msg msg, Done done, Failed failed);
};

bus_probe_actor::behavior_type bus_probe_impl(bus_probe_state::ptr self, bus_actor bus,
                                              bus_probe_settings settings, node_env env);

}  // namespace waggle
