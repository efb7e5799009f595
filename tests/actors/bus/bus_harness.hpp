#pragma once

// What the bus conformance suite (bus_conformance_test.cpp) needs of a
// driver: the buses of one or two nodes in this process, each on a real
// (threaded) actor system, since the networked drivers wait on sockets. A
// test waits on a subscriber's inbox with a deadline, never on a sleep.

#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include <caf/all.hpp>

#include "actors/bus/caf_bus_settings.hpp"
#include "actors/bus/nats_bus_settings.hpp"
#include "actors/bus/pg_bus_settings.hpp"
#include "actors/support/metrics.hpp"
#include "messages/interfaces.hpp"

namespace waggle::testing {

using namespace std::chrono_literals;

class bus_harness {
 public:
  virtual ~bus_harness() = default;
  virtual size_t nodes() const = 0;
  virtual bus_actor bus(size_t node) = 0;
  virtual caf::actor_system& system(size_t node) = 0;
  // The database of a driver on PostgreSQL (empty for the others).
  virtual std::string database_url() const { return {}; }
  // A node's metrics (its bus counters).
  virtual std::shared_ptr<metrics> stats(size_t node) = 0;
  // Ends a node as a crash would, as far as its peers can tell (the CAF driver).
  virtual void kill(size_t) {}
  // Kills a node and starts it again under the same node id (the CAF driver).
  virtual void restart(size_t) {}
};

std::unique_ptr<bus_harness> make_bus_harness(const std::string& driver);
// Two PostgreSQL-driver nodes on one scratch database; `tweak(node, settings)`
// may change a node's settings before it starts.
std::unique_ptr<bus_harness> make_pg_bus_harness(
  std::function<void(size_t, pg_bus_settings&)> tweak = {});
// `nodes` CAF-driver nodes registered in one scratch database, each on its
// own actor system and middleman; returns once they all see each other
// (nodes whose protocol version `tweak` changed are not waited for).
std::unique_ptr<bus_harness> make_caf_bus_harness(
  size_t nodes, std::function<void(size_t, caf_bus_settings&)> tweak = {});

class nats_test_server;
// Two NATS-driver nodes, each its own actor system and NATS connection, on
// `server` (a new nats_test_server when null, owned by the harness).
std::unique_ptr<bus_harness> make_nats_bus_harness(
  std::shared_ptr<nats_test_server> server = nullptr,
  std::function<void(size_t, nats_bus_settings&)> tweak = {});

// A subscriber's mailbox, readable from the test thread.
class bus_inbox {
 public:
  void push(bus_message msg);
  void push(bus_lagged lag);
  // The next message, or nullopt if none arrives within `within`.
  std::optional<bus_message> next(std::chrono::milliseconds within = 10s);
  size_t lags() const;

 private:
  mutable std::mutex mtx_;
  std::condition_variable cv_;
  std::deque<bus_message> msgs_;
  size_t lags_ = 0;
};

// A subscriber that puts what it receives in `inbox`; given a bus, it also
// answers every message that has a reply_to with "re:" + its payload.
bus_subscriber_actor spawn_bus_subscriber(caf::actor_system& sys, std::shared_ptr<bus_inbox> inbox,
                                          bus_actor replier = {});

caf::expected<bus_ack> bus_publish_to(caf::actor_system& sys, const bus_actor& bus,
                                      bus_publish msg);
caf::expected<bus_subscription> bus_subscribe_to(caf::actor_system& sys, const bus_actor& bus,
                                                 bus_subscribe sub);
caf::expected<bus_message> bus_request_of(caf::actor_system& sys, const bus_actor& bus,
                                          bus_request req);

}  // namespace waggle::testing
