#pragma once

// The proofs the heartbeat prober has committed, newest last (docs/replicas.md).
// Each entry says: a replica that shows `token` (in `epoch`) holds every commit
// that ended before the node's clock read `sampled`, and every event row whose
// created_at is below fence_wall() except rows inserted late (history_backfill).
//
// The prober is the only writer; the reader sessions read it at the moment
// they route a read. It is shared state, not a message: a session blocks in
// libpqxx for a whole read, and a ring sent to its mailbox would wait behind
// that read, so the session would route on an older ring than the node has.
// Readers take an immutable snapshot; a push replaces it.

#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace waggle {

struct ring_entry {
  using clock = std::chrono::steady_clock;
  int64_t token = 0;
  // min(probe statement start, oldest open transaction start), unix seconds
  // on the database's clock.
  double fence_raw = 0;
  int64_t floor_secs = 0;  // the commit floor F the database enforces
  // The node's steady clock right BEFORE the probe was sent: every commit
  // acknowledged to this node before it is in the proof.
  clock::time_point sampled{};
  double fence_wall() const { return fence_raw - static_cast<double>(floor_secs); }
};

struct ring_snapshot {
  std::string epoch;
  std::vector<ring_entry> entries;  // ascending token
  const ring_entry* newest() const { return entries.empty() ? nullptr : &entries.back(); }
  // The greatest entry whose token is at most `token`; nullptr when the
  // replica is behind every entry.
  const ring_entry* proof_for(int64_t token) const;
};

class heartbeat_ring {
 public:
  using clock = ring_entry::clock;
  // How far back entries are kept: a replica further behind proves nothing,
  // which also bounds how long it may show a removed row (NIP-11 says so).
  static constexpr std::chrono::seconds default_window{60};

  explicit heartbeat_ring(std::chrono::milliseconds window = default_window)
    : window_(window), current_(std::make_shared<const ring_snapshot>()) {}

  std::shared_ptr<const ring_snapshot> snapshot() const;

  enum class push_result { appended, epoch_changed, regression };
  // A committed probe. A new epoch clears the ring first; a token at or
  // below the newest one in the same epoch clears it and says `regression`
  // (the prober then rotates the epoch). Entries older than the window go.
  push_result push(const std::string& epoch, const ring_entry& e);
  // An epoch whose proofs start with the next probe (after a rotation).
  void reset(const std::string& epoch);

 private:
  std::chrono::milliseconds window_;
  mutable std::mutex mtx_;
  std::shared_ptr<const ring_snapshot> current_;
};

}  // namespace waggle
