#pragma once

// The NATS bus driver's connection (docs/bus.md, "NATS"): one libnats
// connection and its subscriptions, owned by the facade (nats_bus) and
// used only from its thread. libnats calls back on threads of its own;
// those callbacks never touch the facade's state: they decode what the
// server sent and hand it to the facade as a message (nats_delivery,
// nats_link_event), through a gate the destructor closes first, so no
// callback reaches the actor system once the facade is gone.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include <caf/actor_control_block.hpp>
#include <caf/error.hpp>
#include <caf/expected.hpp>

#include "actors/bus/nats_bus_settings.hpp"
#include "actors/support/metrics.hpp"

namespace waggle {

class nats_client {
 public:
  // Connects, waiting up to settings.connect_timeout. An error (unavailable)
  // when the server cannot be reached, or when it takes less than a bus
  // payload (bus_max_payload) in one message: every publish of a large
  // message would fail later, so the driver refuses to start instead.
  static caf::expected<std::unique_ptr<nats_client>> connect(const nats_bus_settings& settings,
                                                             std::shared_ptr<metrics> stats);
  ~nats_client();
  nats_client(const nats_client&) = delete;
  nats_client& operator=(const nats_client&) = delete;

  // From now on, what the server sends goes to `facade` (a nats_bus_actor).
  void attach(caf::strong_actor_ptr facade);
  bool connected() const;
  int64_t max_payload() const;
  // Hands a message to libnats (buffered; while reconnecting, up to the
  // reconnect buffer). An empty error when taken.
  caf::error publish(const std::string& subject, const std::string& reply,
                     const std::string& payload);
  // A NATS subscription (a queue subscription with a `queue`): its id.
  caf::expected<int64_t> subscribe(const std::string& subject, const std::string& queue);
  void unsubscribe(int64_t sid);
  // A round trip to the server: everything sent before it has been taken,
  // and everything the server sent before its answer has been read.
  caf::error flush();
  // The messages of `sid` read from the server so far (delivered and still
  // pending in libnats), low 32 bits: a nats_delivery's seq is its place in
  // this count.
  uint32_t position(int64_t sid);
  // The facade has taken a nats_delivery of `bytes` payload bytes.
  void taken(size_t bytes);

  struct impl;

 private:
  explicit nats_client(std::unique_ptr<impl> p);
  std::unique_ptr<impl> impl_;
};

}  // namespace waggle
