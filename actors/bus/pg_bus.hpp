#pragma once

// The PostgreSQL bus driver's facade (docs/bus.md, "PostgreSQL"): answers
// the bus interface for the node's actors and delivers what the fetcher
// reads to the node's subscribers. Publishes queue here and go to the
// publisher one batch at a time (group commit). Owns the workers, linked:
// doorbell, publisher, fetcher (which owns the listener) and keeper.

#include <deque>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "actors/bus/bus_requests.hpp"
#include "actors/bus/bus_table.hpp"
#include "actors/bus/pg_bus_settings.hpp"
#include "actors/support/env.hpp"
#include "messages/interfaces.hpp"

namespace waggle {

struct pg_bus_state {
  static inline const char* name = "pg_bus";
  using ptr = pg_bus_actor::stateful_pointer<pg_bus_state>;

  // A publish waiting for its batch, with whom to answer: its publisher,
  // or (with `inbox` set) the request that sent it.
  struct queued {
    bus_outgoing msg;
    caf::typed_response_promise<bus_ack> promise;
    std::string inbox;
  };

  ptr self = nullptr;
  pg_bus_settings settings;
  node_env env;
  bus_table table;
  std::optional<bus_requests> requests;
  // Request inboxes whose watch the fetcher confirmed (and not yet ended).
  std::set<std::string> watched_inboxes;
  bus_publisher_actor publisher;
  bus_fetcher_actor fetcher;
  std::deque<queued> waiting;
  size_t waiting_bytes = 0;  // payload bytes in `waiting`
  std::vector<queued> in_flight;

  void init(ptr self_ptr, pg_bus_settings s, node_env e);
  caf::result<bus_ack> publish(bus_publish& msg);
  caf::result<bus_subscription> subscribe(bus_subscribe& sub);
  void unsubscribe(uint64_t id);
  caf::result<bus_message> request(bus_request& req);
  void expired(const std::string& inbox);
  void deliver(bus_fetched& fetched);

 private:
  void enqueue(queued q);
  void send_batch();
  void stored(bus_batch_stored& result);
  void unwatch(const bus_table::entry& gone);
  void close_inbox(const std::string& inbox);
};

pg_bus_actor::behavior_type pg_bus_impl(pg_bus_state::ptr self, pg_bus_settings settings,
                                        node_env env);

}  // namespace waggle
