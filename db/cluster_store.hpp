#pragma once

// Cluster fanout's reads of the events table (docs/scaling.md; the cursor
// column in migrations/0013_cluster.sql). Each node tails the events every
// node committed by snapshot differences: a row is read once, when the
// first snapshot that sees it committed is taken, whatever order the
// transactions committed in.

#include <chrono>
#include <cstdint>
#include <optional>
#include <tuple>
#include <string>
#include <utility>
#include <vector>

#include <pqxx/connection>

namespace waggle::db::cluster {

struct committed_row {
  int64_t community_id = 0;
  std::string xid;  // commit_xid (xid8) as text
  std::string id;   // the event id, 32 bytes
  std::string raw;  // the event's JSON
  // Deleted since: only a command that ends access to a channel comes so
  // (its revocation still holds); it is never delivered.
  bool gone = false;
};

struct committed_page {
  std::string snapshot;  // the snapshot the window is read up to (pg_snapshot text)
  std::string read_at;   // the database's clock just after it was taken
  std::vector<committed_row> rows;
  bool more = false;     // cut by a bound: read again after the last row
};

struct page_bounds {
  int rows = 512;
  int64_t bytes = 4 * 1024 * 1024;  // a page holds at least one row, whatever its size
};

// The live (not deleted) events whose transactions committed after `since`
// (and deleted ones of kinds 9001, 9002, 9008, 9022, flagged `gone`)
// and by `upto` (empty: a snapshot taken now, returned in the page), after
// the row (`after`: commit_xid text, community id, event id) when paging;
// ordered by (commit_xid, community_id, id). Ordering by transaction id
// keeps every causal order: a transaction that began after another's
// commit (an event sent after the OK of the one before) has the higher id.
// With `received_since` (a timestamptz), "after `since`" becomes "received at
// or after it": the read after the server changed, when transaction ids may
// have been handed out again below `since`.
committed_page fetch_committed(
  pqxx::connection& conn, const std::string& since, const std::string& upto,
  const std::optional<std::tuple<std::string, int64_t, std::string>>& after, page_bounds bounds,
  const std::string& received_since = {});

// A change of who may use a community that ends someone's access.
struct access_change {
  int64_t community_id = 0;
  std::string xid;     // commit_xid as text
  int64_t seq = 0;
  std::string pubkey;  // hex; empty: the community is no longer open to everyone
};

// The changes of community_changes that end access (a membership removed, a
// ban, a policy change that leaves the community not open now) committed in
// the same window as fetch_committed reads, all of them (a window's changes
// are few: each is one administrative act), ordered by (commit_xid, seq).
std::vector<access_change> fetch_access_changes(pqxx::connection& conn, const std::string& since,
                                                const std::string& upto,
                                                const std::string& received_since = {});

// The ids of the nodes the registry (bus_nodes) holds live, but `self`:
// heartbeat within `ttl`, whatever their driver.
std::vector<std::string> live_node_ids(pqxx::connection& conn, const std::string& self,
                                       std::chrono::seconds ttl);

// Keeps `node_id` in the registry (bus_nodes) with a fresh heartbeat,
// whatever the bus driver (the PostgreSQL and CAF drivers register their
// node themselves; NATS's does not): barriers ask the nodes it lists. An
// existing row keeps its address and port.
void announce(pqxx::connection& conn, const std::string& node_id, int protocol_version);

// The push gate across nodes (migrations/0014): a lease's intent, committed
// before the lease's barrier reads the registry; and what a node that has
// just registered must gate: communities with a live lease or a recent
// intent.
void note_gate_intent(pqxx::connection& conn, int64_t community_id);
std::vector<int64_t> gate_communities(pqxx::connection& conn);

// The registry as an operator reads it (GET /cluster): every row of
// bus_nodes, with whether its heartbeat is within `ttl`, as a JSON array.
std::string registry_json(pqxx::connection& conn, std::chrono::seconds ttl);

}  // namespace waggle::db::cluster
