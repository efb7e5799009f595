#pragma once

// The CAF bus driver's facade (docs/bus.md, "CAF"): answers the bus
// interface on its node, and is published through the middleman so that the
// facades of other nodes connect to it. Each node tells its peers what it
// subscribes to (bus_interest, whole, on connect and after each change); a
// publish is delivered here and forwarded to the peers that want it, each
// queue group's message going to one node with members, nodes taken in turn.
// Peers are found through the registry worker and reconnected with backoff.

#include <deque>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>

#include "actors/bus/bus_requests.hpp"
#include "actors/bus/bus_table.hpp"
#include "actors/bus/caf_bus_settings.hpp"
#include "actors/support/env.hpp"
#include "messages/interfaces.hpp"

namespace waggle {

struct caf_bus_state {
  static inline const char* name = "caf_bus";
  using ptr = caf_bus_actor::stateful_pointer<caf_bus_state>;
  using interest_key = std::pair<std::string, std::string>;  // subject, group ("" = plain)

  struct peer {
    caf_bus_actor handle;
    caf::node_id node;  // the process this node's own connect reached
    std::set<interest_key> wants;
    // Flow control: forwards sent to it, and how many of them it confirmed
    // having taken (a sync frame answered after them in its mailbox).
    uint64_t sent = 0;
    uint64_t confirmed = 0;
    bool syncing = false;
    bool full(size_t window) const { return sent - confirmed >= window; }
  };
  // A publish (or a request's message) held while a peer it goes to has
  // its window full: acknowledged when it leaves, in order.
  struct held_message {
    bus_message msg;
    std::optional<caf::typed_response_promise<bus_ack>> ack;
  };
  struct known_peer {
    bus_peer_info info;
    // What a process that is not (yet) the one this node connected to under
    // this id said it wants: taken once a connect to the registry's address
    // reaches that same process.
    std::optional<std::pair<caf::node_id, std::set<interest_key>>> pending;
    bool connecting = false;
    steady_time next_attempt{};
    std::chrono::milliseconds backoff{0};
  };

  ptr self = nullptr;
  caf_bus_settings settings;
  node_env env;
  bus_table table;
  std::optional<bus_requests> requests;
  std::map<std::string, peer> peers;        // connected, by node id
  std::map<std::string, known_peer> known;  // live in the registry
  std::map<interest_key, size_t> turns;     // whose turn a group's next message is
  std::set<std::string> warned_versions;    // nodes refused for their protocol version
  std::deque<held_message> held;            // publishes waiting for a peer's window

  void init(ptr self_ptr, caf_bus_settings s, node_env e);
  caf::result<bus_ack> publish(bus_publish& msg);
  caf::result<bus_subscription> subscribe(bus_subscribe& sub);
  void unsubscribe(uint64_t id);
  caf::result<bus_message> request(bus_request& req);
  bus_peer_frame receive(bus_peer_frame& frame);
  void receive(bus_peer_forward& frame);
  void update_peers(bus_peers& live);
  void peer_down(const caf::actor_addr& who);
  void subscriber_down(const caf::actor_addr& who);
  // The message being handled comes from an actor of this process.
  bool local_sender() const;

 private:
  std::set<interest_key> interest() const;
  bus_peer_frame interest_frame() const;
  void add_peer(const std::string& node_id, caf_bus_actor handle, caf::node_id node);
  void send_interest(const std::string& id, const caf_bus_actor& to);
  // A peer's answer to this node's interest frame: its own interest.
  void take_reply(const std::string& id, const caf_bus_actor& from, bus_peer_frame& reply);
  std::optional<std::set<interest_key>> decode_interest(const bus_peer_frame& frame);
  void connect(known_peer& k);
  void route(bus_message msg);
  // Routes `msg` now, or holds it (with its ack) behind the messages
  // held before it; an error when too many are held.
  caf::result<bus_ack> route_or_hold(bus_message msg, bool answer);
  bool blocked(const bus_message& msg) const;
  void release();
  void send_forward(const std::string& id, peer& p, const bus_forward& f);
  void sync(const std::string& id, peer& p);
  void deliver_here(const bus_message& msg, bool plain, const std::vector<std::string>& groups);
  void after_unsubscribe(const bus_table::entry& gone);
};

// Spawns the facade and its registry worker and publishes the facade on
// settings.port (0: any; the registry records the port bound). An error when
// the port cannot be bound.
caf::expected<caf_bus_actor> spawn_caf_bus(caf::actor_system& sys, caf_bus_settings settings,
                                           node_env env);

}  // namespace waggle
