#pragma once

// The engine of `waggle import`, and of anything else that brings events
// from outside a client's connection (`waggle sync`): a relay node's actors
// in this process (the node's own composition: ingest and its writer
// sessions, the group actor and its sessions and roster actors, the hub, ...),
// with its start-up checks, and no port. Each event goes through the load
// actor (actors/portability/load_actor.hpp): the relay's admission with
// `vouched` set, then ingest or the group actor, answered after COMMIT.
// docs/portability.md says what is vouched, what is refused and what is
// re-derived.
//
//   loader_config cfg;
//   cfg.node.database_url = url;
//   cfg.node.relay_key_file = "/var/lib/waggle/relay.key";  // the serving node's
//   cfg.community = "team.example.com";
//   event_loader loader{cfg};
//   auto results = loader.load(lines);  // one result per line, in order
//   loader.settle();                    // group state published before exit

#include <chrono>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include <pqxx/connection>

#include "actors/node/config.hpp"
#include "actors/portability/load_actor.hpp"
#include "actors/support/env.hpp"
#include "messages/proto/status.hpp"
#include "messages/values.hpp"

namespace waggle {

class node;

// The community named by `host`; with an empty host, the database's only
// one. The error names the hosts there are.
result<community> find_community(pqxx::connection& conn, const std::string& host);

struct loader_config {
  // The node's settings, as `waggle serve` would take them: database_url,
  // relay_key_file (group state is signed with this key, so it must be the
  // serving node's), writers, max_batch, max_frame_bytes, group_sessions...
  node_config node;
  std::string community;  // its host
  node_env env = node_env::production();
  // How long one event may wait for its commit before it is `failed`.
  std::chrono::seconds reply_timeout{120};
};

class event_loader {
 public:
  // Starts the node's actors and runs its start-up checks (the roster fence
  // on every writer connection, stale rosters repaired). Throws
  // std::runtime_error saying what is wrong: an unknown community (naming the
  // ones there are), migrations not current, a failed start-up check.
  explicit event_loader(loader_config cfg);
  // settle(), then the node stops.
  ~event_loader();
  event_loader(const event_loader&) = delete;
  event_loader& operator=(const event_loader&) = delete;

  // Loads `raw_events` (one event's JSON each) in their order and returns one
  // result per event, in the same order, once every one of them is answered:
  // stored and duplicate only after COMMIT. One call at a time.
  std::vector<load_result> load(std::vector<std::string> raw_events);

  // Publishes the group state (39000-39002) of every channel whose commands
  // were loaded since the last call, and returns once it committed. The
  // roster actors publish a moment after each command anyway; this is what
  // a process about to end waits for. The error names a channel that failed.
  status settle();

  int64_t community_id() const { return community_id_; }
  const std::string& relay_pubkey() const;

 private:
  loader_config cfg_;
  int64_t community_id_ = 0;
  std::unique_ptr<node> node_;
  std::set<std::string> unsettled_;  // channels with commands since settle()
};

}  // namespace waggle
