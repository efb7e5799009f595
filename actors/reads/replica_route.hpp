#pragma once

// Where a history page, a COUNT or a search runs: on a replica when the
// heartbeat ring proves the replica holds everything the read is owed, on the
// writer otherwise, with the reason (docs/replicas.md, "Routing"). The
// decision functions are pure (tested without a database); run_routed does
// the reading, called from a reader session's thread.

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <pqxx/connection>

#include "actors/reads/heartbeat_ring.hpp"
#include "db/heartbeat.hpp"
#include "messages/proto/filter.hpp"
#include "messages/values.hpp"

namespace waggle {
namespace db {
class replica_pool;
class prepared_reads;
class read_budget;
}  // namespace db

class metrics;

enum class route_reason : uint8_t {
  covered,                  // replica: the page ends below the proved fence wall
  bounded,                  // replica: a head read within the max age
  disabled,                 // writer: no reader, or a head read with bounded reads off
  uninitialized,            // writer: the ring is empty or its newest proof too old
  stale,                    // writer: the proof does not reach far enough for this read
  reader_acquire_timeout,   // writer: no replica connection within the acquire budget
  reader_validation_error,  // writer: epoch, schema or heartbeat row do not match
  reader_token_behind,      // writer: the replica is behind every proof in the ring
  replica_error,            // writer: the replica failed mid-read; the read ran again here
  community_share,          // writer: the community's reads hold their share of replica connections
  community_reserve,        // writer: the free replica connections are kept for other communities
};
std::string_view to_string(route_reason r);

struct route_decision {
  bool replica = false;
  route_reason reason = route_reason::disabled;
  bool operator==(const route_decision&) const = default;
};

// What routing needs to know of a read.
struct read_shape {
  std::string_view path = "history";  // history, count, search
  // The newest created_at the read can return; nullopt = up to now (a head read).
  std::optional<int64_t> upper;
  // This connection's last acknowledged write (steady clock); a bounded read
  // must be proved at or after it (read-your-writes).
  ring_entry::clock::time_point read_after{};
};

// From the filters and the page: upper = the page's horizon, or the greatest
// `until` when every filter has one.
read_shape shape_of(const std::vector<proto::filter>& filters, const history_page* page,
                    ring_entry::clock::time_point read_after);

struct route_settings {
  std::chrono::milliseconds max_age{0};        // bounded reads; 0 = off
  std::chrono::milliseconds stale_after{5000};  // a ring whose newest proof is older is stale
  std::chrono::milliseconds acquire_budget{150};
  int schema_version = 0;  // the replica must have every migration this binary knows
};

// Judged against the newest proof (the most any replica can prove), before a
// replica is touched: a writer decision, or nullopt (try a replica).
// `backfill`: the community's late-insert watermark, read on the writer.
std::optional<route_decision> precheck(bool have_readers, const ring_snapshot& ring,
                                       const read_shape& shape, const route_settings& s,
                                       ring_entry::clock::time_point now,
                                       std::optional<double> backfill);

// After the replica's first statement: the decision with the proved entry.
route_decision judge(const ring_snapshot& ring, const db::heartbeat_seen* seen,
                     const read_shape& shape, const route_settings& s,
                     ring_entry::clock::time_point now, std::optional<double> backfill);

// The node's replicas, shared by every reader session.
struct replica_set {
  std::vector<std::shared_ptr<db::replica_pool>> pools;
  std::atomic<size_t> next{0};  // round robin: ONE pool, ONE acquire per read
  // Replica connections one community's reads may hold at once, all pools
  // together (0 = no cap): a client that keeps many heavy reads in flight
  // holds at most its community's share, and another community's reads
  // still find a connection (docs/replicas.md, "Shares").
  size_t max_leases_per_community = 0;
  // Connections kept for communities that hold none (0 = no reserve): a
  // community already reading on a replica takes another only while more
  // than this many stay free. Shares alone let two busy communities take
  // everything; with the reserve, every connection is held only when more
  // than `reserved_connections` communities read at once (docs/replicas.md,
  // "Shares").
  size_t reserved_connections = 0;

  enum class share { taken, community_full, reserved };
  // A place for one read of `community`, counted against the capacity of
  // every pool together; anything but `taken`: the read goes to the writer
  // at once, without waiting for a connection.
  share take_share(int64_t community);
  void give_share(int64_t community);

 private:
  std::mutex share_mutex_;
  std::unordered_map<int64_t, size_t> held_;
  size_t held_total_ = 0;
};

struct route_context {
  std::shared_ptr<const heartbeat_ring> ring;
  std::shared_ptr<replica_set> replicas;  // null or empty: routing off
  route_settings settings;
  std::shared_ptr<metrics> stats;
  // Tests only: runs after a replica's proof, before the read's statements
  // (where a recovery conflict or a stopped backend is injected).
  std::function<void(const std::string& backend)> after_proof;
};

// A read's statements on one connection: the same function runs on a
// replica or the writer. `prepared` belongs to that connection.
using read_fn = std::function<void(pqxx::connection&, db::prepared_reads*, db::read_budget&)>;

struct routed_outcome {
  route_decision decision;
  std::string backend;  // of the replica that served it; empty when the writer did
};

// Runs `read` on a proved replica, or returns a writer decision without
// running it (the caller then runs it on its writer connection). A replica
// error mid-read discards the connection and returns writer/replica_error:
// nothing of the replica's partial page is kept. That includes a statement
// the replica cancelled (57014) and a spent budget: the writer decides
// whether the read is too wide, so a routed read may spend the replica's
// budget (statement_timeout + grace) and then the writer's.
// `writer` is the caller's writer connection, read for the backfill
// watermark only when a covered read is possible.
// `writer_backend` names the caller's writer connection in the debug log.
routed_outcome run_routed(route_context& ctx, const read_shape& shape, pqxx::connection& writer,
                          const std::string& writer_backend, int64_t community_id,
                          std::chrono::milliseconds read_budget, const read_fn& read);

}  // namespace waggle
