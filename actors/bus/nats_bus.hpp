#pragma once

// The NATS bus driver's facade (docs/bus.md, "NATS"): answers the bus
// interface on its node over a NATS server. Each (subject, group) this
// node's subscribers want is one NATS subscription (a queue subscription
// for a group), shared by all of them and delivered here through the
// node's bus_table: NATS picks the node for a group's message, the node
// picks one member in turn. Requests wait on the shared inboxes, all of
// this run's taken by one wildcard subscription; "no responders" is the
// server's prompt status reply. The facade is detached: libnats's
// publish, subscribe and flush may block on the socket.

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "actors/bus/bus_requests.hpp"
#include "actors/bus/bus_table.hpp"
#include "actors/bus/nats_bus_settings.hpp"
#include "actors/bus/nats_client.hpp"
#include "actors/support/env.hpp"
#include "messages/interfaces.hpp"

namespace waggle {

struct nats_bus_state {
  static inline const char* name = "nats_bus";
  using ptr = nats_bus_actor::stateful_pointer<nats_bus_state>;
  using key = std::pair<std::string, std::string>;  // subject, group ("" = plain)

  // One NATS subscription and the (subject, group) it carries.
  struct shared_sub {
    std::string subject;
    std::string group;
    // Subscribers that joined it while it was live, with the node's read
    // position then: the messages up to it were published before they
    // subscribed, and are not theirs.
    std::map<uint64_t, uint32_t> joined_at;
  };

  ptr self = nullptr;
  nats_bus_settings settings;
  node_env env;
  std::unique_ptr<nats_client> client;
  bus_table table;
  std::optional<bus_requests> requests;
  std::map<std::string, std::string> asked;  // open requests: inbox -> subject
  std::map<key, int64_t> by_key;              // NATS subscription id by (subject, group)
  std::map<int64_t, shared_sub> subs;
  int64_t inbox_sid = 0;
  bool connected = true;
  uint64_t published = 0;

  void init(ptr self_ptr, nats_bus_settings s, node_env e, std::unique_ptr<nats_client> c);
  caf::result<bus_ack> publish(bus_publish& msg);
  caf::result<bus_subscription> subscribe(bus_subscribe& sub);
  void unsubscribe(uint64_t id);
  caf::result<bus_message> request(bus_request& req);
  void expired(const std::string& inbox);
  void receive(nats_delivery& d);
  void link(nats_link_event& e);
  void subscriber_down(const caf::actor_addr& who);

 private:
  void answer(nats_delivery& d);
  void release(const bus_table::entry& gone);
  void lag(shared_sub& sh, uint64_t missed);
};

// Connects to settings.url and spawns the facade (detached). An error
// (unavailable) when the server cannot be reached or takes less than a bus
// payload in one message; bad_subject for an invalid node id.
caf::expected<nats_bus_actor> spawn_nats_bus(caf::actor_system& sys, nats_bus_settings settings,
                                             node_env env);

}  // namespace waggle
