#pragma once

// The PostgreSQL bus driver's SQL (docs/bus.md, "PostgreSQL"; tables in
// migrations/0012_bus.sql). Plain functions over one connection; the actors
// of actors/bus/ own the connections and decide when to call them.

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <pqxx/connection>

namespace waggle::db::bus {

// A connection for one of the driver's actors (`role` names it in
// pg_stat_activity): connects within 2 s, notices a dead peer by TCP
// keepalive and user timeout within about 10 s, and ends any statement
// after `statement_timeout` (0: none, for the listener that waits), so a
// hung server costs a reconnect, never a stuck actor.
std::unique_ptr<pqxx::connection> open(const std::string& url, const std::string& role,
                                       std::chrono::milliseconds statement_timeout);

// -- publish -------------------------------------------------------------------------

struct outgoing {
  int shard = 0;
  int64_t subject_hash = 0;
  std::string subject;
  std::string reply_to;
  std::string payload;
  // A request: stored only if a live node subscribes to the subject.
  bool needs_responders = false;
};

struct published {
  int64_t id = 0;  // 0: not stored, nobody responds (a request)
};

// Stores a batch in one transaction committed with synchronous_commit = off.
// Throws (pqxx) when the database is unreachable: nothing was stored, or, if
// the connection broke at COMMIT, the caller cannot know.
std::vector<published> publish(pqxx::connection& conn, const std::vector<outgoing>& batch,
                               std::chrono::seconds node_ttl);

// -- fetch ---------------------------------------------------------------------------

struct fetched {
  int64_t id = 0;
  std::string xid;  // xid8, as text
  std::string subject;
  std::string reply_to;
  std::string payload;
  double age_ms = 0;  // from publish to this fetch, by the database's clock
};

struct page {
  std::string snapshot;  // the snapshot the page was read up to (pg_snapshot text)
  std::string read_at;   // the database's clock just after that snapshot was taken
  std::vector<fetched> rows;
  bool more = false;     // the page was cut by a bound: fetch again after its last row
};

struct fetch_bounds {
  int rows = 256;
  int64_t bytes = 4 * 1024 * 1024;  // a page holds at least one row, whatever its size
};

// The rows of `subjects` on `shard` that committed after `since` and by
// `upto` (empty: a snapshot taken now, returned in page::snapshot), after
// the row (after_xid, after_id) when paging. Ordered by (xid, id). With
// `published_since` (a timestamptz), "after `since`" becomes "published at
// or after it": the read after the server restarted, when transaction ids
// may have been handed out again below `since`.
page fetch(pqxx::connection& conn, int shard, const std::string& since, const std::string& upto,
           const std::optional<std::pair<std::string, int64_t>>& after,
           const std::vector<std::string>& subjects, fetch_bounds bounds,
           const std::string& published_since = {});

// A snapshot taken now (pg_snapshot text): where a new reader starts; with
// `taken_at`, also the database's clock just after it was taken.
std::string current_snapshot(pqxx::connection& conn, std::string* taken_at = nullptr);

// When the server a connection reached started (pg_postmaster_start_time),
// and when it last lost its statistics (which a crash recovery does): a
// change means a restart, a crash recovery or another server (a promoted
// standby).
std::string server_started(pqxx::connection& conn);

// Claims (message, group) pairs for `node`: returns those this node won.
std::vector<std::pair<int64_t, std::string>> claim(
  pqxx::connection& conn, const std::string& node,
  const std::vector<std::pair<int64_t, std::string>>& wanted);

// -- registry ------------------------------------------------------------------------

constexpr int protocol_version = 1;

struct node_row {
  std::string node_id;
  std::string address;
  int port = 0;
  int protocol_version = 0;
};

struct subscription_row {
  std::string subject;
  std::string group;
  int64_t subject_hash = 0;
};

// Registers (or re-registers after a restart or an expiry) `node` with
// exactly `subscriptions`, in one transaction: a request never finds the
// node's live subscriptions missing in between (a false no_responders), and
// what a previous run of it left behind is dropped.
void register_node(pqxx::connection& conn, const node_row& node,
                   const std::vector<subscription_row>& subscriptions);
// Heartbeats `node`; false if its row is gone (re-register).
bool heartbeat(pqxx::connection& conn, const std::string& node_id);
void unregister_node(pqxx::connection& conn, const std::string& node_id);
// The nodes heartbeating within `ttl`, but `self`.
std::vector<node_row> live_nodes(pqxx::connection& conn, const std::string& self,
                                 std::chrono::seconds ttl);
// Records that `node` has (or no longer has) a subscriber of (subject, group).
void set_subscribed(pqxx::connection& conn, const std::string& node, const std::string& subject,
                    const std::string& group, int64_t subject_hash, bool subscribed);

// -- maintenance -----------------------------------------------------------------------

// Deletes messages published more than `retention` ago, at most `batch`
// rows (oldest first, by the published_at index); returns how many.
int64_t collect_garbage(pqxx::connection& conn, std::chrono::seconds retention, int batch);
// Its statement ($1: retention in seconds, $2: batch), for EXPLAIN in tests.
extern const char* const gc_sql;
// Deletes nodes silent for `expiry` or more (and so their subscriptions).
int64_t expire_nodes(pqxx::connection& conn, std::chrono::seconds expiry);

// NOTIFYs every channel of `channels`, in one statement (outside a transaction).
void ring(pqxx::connection& conn, const std::vector<std::string>& channels);
// The doorbell channel of a shard, and the shard of a channel (-1: not a
// doorbell channel).
std::string shard_channel(int shard);
int shard_of_channel(const std::string& channel);

}  // namespace waggle::db::bus
