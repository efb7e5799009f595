#pragma once

// The PostgreSQL bus driver's fetcher (docs/bus.md, "Fetching"): one per
// node, detached, on its own connection, reading each shard the node wants
// as one reader (not one per subscriber). Per shard it keeps the snapshot
// it has read up to; a fetch takes the rows that committed after it, a
// bounded page at a time, until drained. It claims queue-group messages for
// the node's members and hands everything to the facade. It also keeps the
// node's rows in bus_nodes and bus_subscriptions (what requests look for),
// and owns the listener, whose set of shards it decides.
//
// Woken by the listener (a doorbell, a reconnect), and every `poll` by
// itself (the backstop when a NOTIFY is lost or the listener is down).

#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>

#include <pqxx/connection>

#include "actors/bus/pg_bus_settings.hpp"
#include "actors/support/env.hpp"
#include "messages/interfaces.hpp"

namespace waggle {

struct bus_fetcher_state {
  static inline const char* name = "bus_fetcher";
  using ptr = bus_fetcher_actor::stateful_pointer<bus_fetcher_state>;

  struct watchers {
    int plain = 0;
    int inboxes = 0;
    std::map<std::string, int> groups;
    bool empty() const { return plain == 0 && inboxes == 0 && groups.empty(); }
  };
  struct shard {
    std::string since;  // the snapshot read up to (pg_snapshot text)
    std::map<std::string, watchers> subjects;
    steady_time drained{};
    // A drain that failed midway resumes here: the pages before were
    // handed over already, and must not be read again.
    std::string upto;
    std::optional<std::pair<std::string, int64_t>> after;
    // The database's clock just after the snapshot this shard was last
    // read (or is being paged) up to: nothing published since was read.
    std::string read_to_at;
    // Set when the server's transaction ids went back below `since` (a
    // crash or failover lost WAL): the next read takes what was published
    // at or after this time instead of trusting the snapshot.
    std::string restarted_at;
    bool lag_pending = false;  // the server changed: tell the subscribers
  };

  ptr self = nullptr;
  pg_bus_settings settings;
  node_env env;
  pg_bus_actor facade;
  bus_listener_actor listener;
  std::unique_ptr<pqxx::connection> conn;
  std::string server_started;  // pg_postmaster_start_time() of the server we read
  std::map<int32_t, shard> shards;
  // (subject, group) pairs with a local subscriber: this node's bus_subscriptions.
  std::map<std::pair<std::string, std::string>, int> registered;
  bool registry_dirty = true;

  caf::result<bus_ack> watch(bus_watch& w);
  void fetch(const std::vector<int32_t>& which);
  void poll();

 private:
  bool connect();
  void lose_connection(const std::exception& e);
  void drain(int32_t id, shard& s);
  void sync_registry();
  void tell_listener();
};

bus_fetcher_actor::behavior_type bus_fetcher_impl(bus_fetcher_state::ptr self,
                                                  pg_bus_settings settings, pg_bus_actor facade,
                                                  node_env env);

}  // namespace waggle
