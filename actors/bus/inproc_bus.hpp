#pragma once

// The in-process bus driver (docs/bus.md, "In-process"): the default for a
// node alone. A publish is in every recipient's mailbox when its bus_ack is
// sent; nothing outlives the node.

#include <string>

#include "actors/bus/bus_requests.hpp"
#include "actors/bus/bus_table.hpp"
#include "actors/support/env.hpp"
#include "messages/interfaces.hpp"

namespace waggle {

struct inproc_bus_state {
  static inline const char* name = "inproc_bus";

  using ptr = inproc_bus_actor::stateful_pointer<inproc_bus_state>;
  ptr self = nullptr;
  node_env env;
  bus_table table;
  bus_requests requests{"local"};
  uint64_t published = 0;

  caf::result<bus_ack> publish(bus_publish& msg);
  caf::result<bus_subscription> subscribe(bus_subscribe& sub);
  void unsubscribe(uint64_t id);
  caf::result<bus_message> request(bus_request& req);

 private:
  void deliver(bus_message msg);
};

inproc_bus_actor::behavior_type inproc_bus_impl(inproc_bus_state::ptr self, node_env env);

}  // namespace waggle
