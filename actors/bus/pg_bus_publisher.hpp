#pragma once

// The PostgreSQL bus driver's publisher (docs/bus.md, "PostgreSQL"):
// detached, owns one connection, stores one batch per transaction (the
// facade sends the next batch when this one is answered: group commit), then
// tells the doorbell which shards have news. Never rings inside the
// transaction: a NOTIFY there would take the commit lock every commit waits on.

#include <memory>

#include <pqxx/connection>

#include "actors/bus/pg_bus_settings.hpp"
#include "actors/support/env.hpp"
#include "messages/interfaces.hpp"

namespace waggle {

struct bus_publisher_state {
  static inline const char* name = "bus_publisher";
  using ptr = bus_publisher_actor::stateful_pointer<bus_publisher_state>;
  ptr self = nullptr;
  pg_bus_settings settings;
  node_env env;
  bus_doorbell_actor doorbell;
  std::unique_ptr<pqxx::connection> conn;

  bus_batch_stored store(bus_store_batch& batch);
};

bus_publisher_actor::behavior_type bus_publisher_impl(bus_publisher_state::ptr self,
                                                      pg_bus_settings settings,
  bus_doorbell_actor doorbell, node_env env);

}  // namespace waggle
