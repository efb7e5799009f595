#pragma once

// Ingest's push gate cache (docs/push.md, "The gate cache"): which
// communities may have a live lease, so a batch skips the gate statement
// for the others. Plain state, tested without a mailbox.
//
// Why it loses no wake: the cache only ever says "gate" too often. It starts
// as "gate everything" until the matcher's load of the communities with a
// live lease arrives; a community enters the set the moment a lease event
// for it reaches ingest, before that lease is written; and the lease is
// written only once every batch dispatched before that moment has finished
// (the barrier in ingest_state::dispatch), with the ids of the push events
// those batches stored without the gate (`skipped`) handed to its
// backfill. Every push event therefore either ran the gate statement (whose
// SHARED lock orders it against the activation's EXCLUSIVE one) or committed
// before the activation began and is named to it. Communities leave the set
// only at a restart (a lease that ends makes its community pay the gate
// statement, inside its batch's transaction, until then). The lease state in
// the database stays the authority: the cache only decides whether to ask.

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

namespace waggle {

class push_gate_cache {
 public:
  // Push off: no batch runs the gate statement and nothing is remembered.
  // Not `cached` (several nodes on one database): every batch gates every
  // community, as before the load.
  explicit push_gate_cache(bool enabled = true, bool cached = true)
    : enabled_(enabled), cached_(cached) {}

  void on_loaded(const std::vector<int64_t>& communities);
  void on_lease_seen(int64_t community);

  bool enabled() const { return enabled_; }
  bool loaded() const { return loaded_; }
  bool gates(int64_t community) const;

  // What a batch of these communities is told: all, or the gated ones.
  struct decision {
    bool all = false;
    std::vector<int64_t> gated;
  };
  decision decide(const std::vector<int64_t>& communities) const;

  // A push-kind event the batch stored without the gate statement while its
  // community is gated now: remembered for that community's next lease.
  void note_stored(int64_t community, const std::string& event_id, const decision& at_dispatch);
  std::vector<std::string> take_skipped(int64_t community);
  // The same, kept: for another node's lease (several may ask).
  std::vector<std::string> skipped(int64_t community) const;

 private:
  bool enabled_;
  bool cached_;
  bool loaded_ = false;
  std::set<int64_t> gated_;
  std::map<int64_t, std::vector<std::string>> skipped_;
};

}  // namespace waggle
