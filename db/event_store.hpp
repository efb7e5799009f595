#pragma once

// The SQL of the write path and the read path for events. Every statement
// carries a community predicate. Functions take the caller's connection: the
// actor that owns the connection decides when they run (docs/actor-rules.md).

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <pqxx/connection>
#include <pqxx/except>
#include <pqxx/transaction>

#include "messages/proto/event.hpp"
#include "messages/proto/filter.hpp"
#include "messages/values.hpp"

namespace waggle::db {

class read_budget;  // db/read_budget.hpp: the time a read may spend, all statements together
class prepared_reads;  // db/prepared_reads.hpp: a session's prepared read statements

struct write_options {
  // The group actor writes NIP-29 commands (9000-9022) after authorising them
  // under the channel's membership lock in the same transaction; everyone
  // else gets them refused here (they must go through the group actor).
  bool group_commands_authorized = false;
  // The relay's key (64 hex): its own events (NIP-29 and NIP-43 state) are
  // not subject to the community's membership, bans or kind rules.
  std::string relay_pubkey;
  // Tests only: runs inside the transaction right before COMMIT, after every
  // statement of the batch (a barrier for concurrency tests).
  std::function<void()> before_commit;
  // The push gate (docs/push.md): the communities whose inserted push-kind
  // events run the gate statement. nullopt: every community (the safe
  // default for every path but ingest, which knows which communities have
  // no live lease and lists the others).
  std::optional<std::vector<int64_t>> push_gated;
  // Push leases (kind 30350) are accepted only on their own path
  // (db/push_store.hpp), which sets this and runs `after_write`.
  bool accepting_lease = false;
  // In write_batch's transaction after the batch's statements: may change
  // the results; false rolls the transaction back instead of committing.
  std::function<bool(pqxx::work& tx, std::vector<write_result>& results)> after_write;
};

// Runs `items` as ONE transaction (docs/write-path.md): multi-row insert with
// ON CONFLICT DO NOTHING RETURNING, replacement of replaceable/addressable
// heads under per-coordinate advisory locks taken in sorted order, NIP-09
// soft deletion, channel membership checks for posts and the TTL refresh of
// ephemeral channels, then COMMIT. Returns one result per item, in input order.
// Throws pqxx exceptions; callers use write_batch_bisecting (db/batch_bisect.hpp).
std::vector<write_result> write_batch(pqxx::connection& conn, const std::vector<ingest_item>& items,
                                      const write_options& opts = {});

// write_batch's statements inside the caller's transaction (no COMMIT, and
// `before_commit` is not run): the group store writes a command event in the
// same transaction as the membership change it authorised.
std::vector<write_result> write_events(pqxx::work& tx, const std::vector<ingest_item>& items,
                                       const write_options& opts = {});

// Batches whose TTL refresh failed (a WARNING in the server log; the events
// were kept), since the process started. Exported as a metric: a refresh that
// keeps failing would let the reaper archive channels still in use.
uint64_t ttl_refresh_failures();

// Tag values longer than this (bytes) are not indexed in event_tags, so
// history queries can never match them (filter_limits::max_tag_value_len).
constexpr size_t max_indexed_tag_value = 256;

// History for REQ: each filter queried with its own limit, results merged,
// de-duplicated by id and ordered newest first (ties by id ascending). Returns
// the stored raw JSON of each event. `now` (unix seconds, the caller's clock)
// hides every event whose NIP-40 expiration is at or before it.
std::vector<std::string> query_events(pqxx::connection& conn, int64_t community_id,
                                      const std::vector<proto::filter>& filters,
                                      const proto::filter_limits& lim, int64_t now,
                                      read_budget* budget = nullptr);

// One page of the same history (docs/protocol.md, "History in pages"):
// each filter with rows left reads at most `at.rows` of them past the
// horizon, and what every filter owes up to the new horizon is returned, in
// the same order as query_events. Concatenated, the pages of a history are
// exactly what query_events returns at once (rows = 0 is that). `next` is the
// request of the following page when `more`.
// A read with a NIP-50 `search` filter is one page whatever `at.rows` says
// (more = false): every filter reads its whole limit, the search filters'
// rows first in rank order, then the others newest first (docs/search.md).
struct history_page_result {
  std::vector<std::string> raws;
  bool more = false;
  history_page next;
};
history_page_result query_events_page(pqxx::connection& conn, int64_t community_id,
                                      const std::vector<proto::filter>& filters,
                                      const proto::filter_limits& lim, int64_t now,
                                      const history_page& at, read_budget* budget = nullptr,
                                      prepared_reads* prepared = nullptr);

// NIP-45: number of distinct live events matching any filter, not expired at
// `now` (as for query_events); a `search` filter counts its matches, within
// `search_timeout_ms` of `lim` (a count that needs longer is cancelled).
uint64_t count_events(pqxx::connection& conn, int64_t community_id,
                      const std::vector<proto::filter>& filters, int64_t now,
                      read_budget* budget = nullptr, prepared_reads* prepared = nullptr,
                      const proto::filter_limits& lim = {});

// NIP-77 (docs/negentropy.md): the (created_at, id) of every live event
// matching any filter, exactly the events a REQ with no limit could be served
// (community, liveness, NIP-40, channels only by #h), ascending, packed as
// proto::negentropy's 40-byte items. More than `max_items` matches is
// `too_many` with nothing packed: a session never holds a partial set.
// Filters with `search` are skipped (the caller refuses them).
struct sync_items_result {
  std::string packed;
  uint64_t count = 0;
  bool too_many = false;
};
sync_items_result sync_items(pqxx::connection& conn, int64_t community_id,
                             const std::vector<proto::filter>& filters, int64_t now,
                             size_t max_items, read_budget* budget = nullptr,
                             prepared_reads* prepared = nullptr);

// The live stored events of these ids (64-hex; others ignored) in the
// community, oldest first (db/event_sync.cpp).
struct stored_event {
  std::string raw;
  int32_t kind = 0;
};
std::vector<stored_event> live_events_by_id(pqxx::connection& conn, int64_t community_id,
                                            const std::vector<std::string>& ids_hex, int64_t now);
// The hex ids of the community's live events of these kinds (db/event_sync.cpp).
std::vector<std::string> ids_of_kinds(pqxx::connection& conn, int64_t community_id,
                                      const std::vector<int32_t>& kinds);

// The advisory-lock key texts of docs/lock-protocol.md (hashed with hashtextextended(key, 0)).
// Order when several are taken: replacement -> membership -> channel_ttl -> push_gate.
std::string replacement_lock_key(int64_t community_id, int32_t kind, const std::string& pubkey,
                                 const std::string& d_tag);
std::string membership_lock_key(int64_t community_id, const std::string& channel);
std::string channel_ttl_lock_key(int64_t community_id, const std::string& channel);

}  // namespace waggle::db
