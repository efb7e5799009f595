#pragma once

// The cluster tail (docs/scaling.md): the node's reader of the events every
// node committed, by snapshot differences over each row's transaction id
// (db/cluster_store.hpp): a read takes a new snapshot and fetches what
// committed after the last one and by it, in pages, then moves on to it.
// No event is skipped, whatever order transactions commit in, and none is
// read twice; ordered by transaction id within a read, which keeps every
// causal order. The hub fans out what it has not already (a local commit
// also came straight from the writer).
//
// It reads when another node rings (the relay) and every `poll` in any case,
// so a lost ring, a broken bus or a writer outside the cluster costs at
// most `poll` of latency, never an event. Detached: libpq blocks.

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <tuple>

#include <caf/stateful_actor.hpp>
#include <pqxx/connection>

#include "actors/support/env.hpp"
#include "db/cluster_store.hpp"
#include "messages/interfaces.hpp"

namespace waggle {

struct cluster_tail_settings {
  std::string database_url;
  std::string node_id;  // left out of the live nodes it reports
  std::chrono::seconds node_ttl{30};
  // The tail keeps the node in the registry (db::cluster::announce), every
  // `heartbeat`, under this bus protocol version.
  std::chrono::seconds heartbeat{10};
  int protocol_version = 1;
  caf::timespan poll = std::chrono::milliseconds(500);
  db::cluster::page_bounds bounds;
  // Events sent to the hub before the tail waits for it to take them.
  size_t hub_window = 2048;
};

struct cluster_tail_state {
  static inline const char* name = "cluster_tail";
  using ptr = cluster_tail_actor::stateful_pointer<cluster_tail_state>;

  ptr self = nullptr;
  cluster_tail_settings settings;
  std::function<hub_actor()> current_hub;
  node_env env;

  std::unique_ptr<pqxx::connection> conn;
  std::string since;           // the last snapshot read up to (pg_snapshot text)
  std::string read_at;         // the database's clock just after `since` was taken
  std::string server;          // db::bus::server_started of the server `since` is of
  std::string received_since;  // set after a server change: see fetch_committed
  bool read_queued = false;    // a read is in the mailbox: rings coalesce into it
  steady_time announced{};     // when the registry last heard of this node

  void init(ptr self, cluster_tail_settings settings, std::function<hub_actor()> current_hub,
            node_env env);
  void on_ring();
  void on_tick(bool periodic);
  cluster_read_done on_read_now();
  cluster_nodes on_nodes();

 private:
  bool connect();
  bool read();
  void announce_if_due();
};

cluster_tail_actor::behavior_type cluster_tail_impl(cluster_tail_state::ptr self,
                                                    cluster_tail_settings settings,
                                                    std::function<hub_actor()> current_hub,
                                                    node_env env);

}  // namespace waggle
