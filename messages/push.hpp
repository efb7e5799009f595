#pragma once

// The messages of the push pipeline (docs/push.md). Each struct's `inspect`
// is beside it; the type IDs are in messages/type_ids.hpp.

#include <cstdint>
#include <string>
#include <vector>

#include <caf/meta/type_name.hpp>

#include "messages/delivery.hpp"

namespace waggle {

// Matcher -> ingest: the communities that had a live lease when the matcher
// started (the gate cache's start; until it arrives ingest gates everything).
struct push_gate_loaded {
  std::vector<int64_t> communities;
};
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, push_gate_loaded& x) {
  return f(caf::meta::type_name("push_gate_loaded"), x.communities);
}

// The listen actor -> matcher: match jobs were committed (or, catch_up, a
// reconnected LISTEN may have missed some).
struct push_match_wake {
  bool catch_up = false;
};
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, push_match_wake& x) {
  return f(caf::meta::type_name("push_match_wake"), x.catch_up);
}
// The matcher's own timers: the next batch (stale generations ignored) and
// the 30 s sweep of exhausted jobs, expired leases and old wakes.
struct push_match_tick {
  uint64_t generation = 0;
};
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, push_match_tick& x) {
  return f(caf::meta::type_name("push_match_tick"), x.generation);
}
struct push_sweep_tick {};
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, push_sweep_tick&) {
  return f(caf::meta::type_name("push_sweep_tick"));
}

// What one matcher batch decided, as the trace records it: the loads the
// pure match saw and its wake requests (event index, lease index), so a
// replay can run match_wakes again on the same input and compare.
struct push_match_record {
  int64_t community_id = 0;
  std::vector<std::string> event_ids, event_authors, event_channels;  // "" = no channel
  std::vector<int32_t> event_kinds;
  std::vector<std::string> lease_authors, lease_installations;
  std::vector<std::string> lease_channels, lease_kinds, lease_mutes;  // comma-joined
  std::vector<uint64_t> readable_events;
  std::vector<std::string> readable_authors;
  std::vector<uint64_t> wake_events, wake_leases;
};
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, push_match_record& x) {
  return f(caf::meta::type_name("push_match_record"), x.community_id, x.event_ids,
           x.event_authors, x.event_channels, x.event_kinds, x.lease_authors,
           x.lease_installations, x.lease_channels, x.lease_kinds, x.lease_mutes,
           x.readable_events, x.readable_authors, x.wake_events, x.wake_leases);
}

// Matcher -> a delivery supervisor: wakes written already claimed (first
// attempts), to be sent as slots free.
struct delivery_ready {
  std::vector<delivery_job> jobs;
};
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, delivery_ready& x) {
  return f(caf::meta::type_name("delivery_ready"), x.jobs);
}

}  // namespace waggle
