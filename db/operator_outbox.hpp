#pragma once

// The SQL of operator listeners (docs/delivery.md): registrations, the
// mention outbox written in the event's transaction, and the claims and
// fenced completions of the delivery supervisor. Functions take the caller's
// connection or transaction (docs/actor-rules.md).

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <pqxx/connection>
#include <pqxx/transaction>

#include "messages/proto/event.hpp"

namespace waggle::db {

// The channel every mention-bearing commit NOTIFYs (payload empty).
inline constexpr const char* delivery_wake_channel = "waggle_delivery";

// Kinds whose `p` tags wake listeners: 9 (chat), 40002, 45001, 45003.
bool wakes_listeners(int32_t kind);

// At most this many outbox rows per event, for the targets it names first:
// one event must not turn into an unbounded number of deliveries.
inline constexpr size_t max_deliveries_per_event = 32;

// One stored event that may mention registered targets.
struct mention_source {
  int64_t community_id = 0;
  const proto::event* ev = nullptr;
};

// In the event's transaction, after the events were inserted (only events
// this transaction inserted: a duplicate must add nothing): ONE statement
// for the whole batch, whatever its size, inserting one outbox row per
// (listener, target, community, event) for every distinct 32-byte hex `p`
// tag of a wakes_listeners kind naming a registered target (ON CONFLICT DO
// NOTHING; at most max_deliveries_per_event per event, in tag order), and calling pg_notify(delivery_wake_channel) only when it added
// rows. Returns the rows added. Sources of other kinds are skipped without a
// statement; no statement at all when none is left.
size_t enqueue_mentions(pqxx::work& tx, const std::vector<mention_source>& stored);

// -- registrations -----------------------------------------------------------

// Registers (or renews: created_at = now()) each target for `listener` in
// `community_id`, in one statement and its own transaction. Keys are 64 hex,
// checked by the caller; duplicates in `targets` count once. Returns the
// distinct targets registered, or nullopt (and nothing written) when the
// listener would hold more than `max_registrations` in the community
// (0: no cap).
std::optional<size_t> register_listener_targets(pqxx::connection& conn, int64_t community_id,
                                                const std::string& listener,
                                                const std::vector<std::string>& targets,
                                                size_t max_registrations = 0);

struct listener_registration {
  std::string target;      // 64 hex
  int64_t registered_at;   // unix seconds (created_at)
};
std::vector<listener_registration> list_listener_targets(pqxx::connection& conn,
                                                         int64_t community_id,
                                                         const std::string& listener);

// Deletes registrations older than `max_age`; returns how many.
size_t reap_listener_registrations(pqxx::connection& conn, std::chrono::seconds max_age);

// -- the outbox ----------------------------------------------------------------

struct claim_settings {
  std::chrono::seconds lease{30};        // a claim not completed by then may be claimed again
  int max_attempts = 9;                  // rows with this many attempts are not claimed
  std::chrono::seconds retention{900};   // rows older than this are not claimed
};

// One claimed row, with what a delivery needs.
struct claimed_delivery {
  int64_t id = 0;
  std::string delivery_id;  // uuid text
  std::string claim_id;     // uuid text, the fence of every completion
  std::string listener;     // 64 hex
  std::string target;       // 64 hex
  int64_t community_id = 0;
  std::string community_host;
  std::string event_raw;    // the stored signed event (JSON)
  int attempts = 0;         // including this one
  int64_t created_at = 0;   // unix seconds, when the row was written
};

// A listener and how many more requests it may have out (its room).
struct listener_room {
  std::string listener;  // 64 hex
  uint32_t room = 0;
};

// Claims up to `n` rows for the listeners with room (rows of other
// listeners are left to nodes that route them), at most `room` of each,
// round-robin across listeners (each one's oldest due first, then each one's
// second, ...): due pending rows, and sending rows whose lease ran out
// (their old claim_id is then fenced out), newer than the retention and
// below max_attempts, FOR UPDATE SKIP LOCKED. Each claimed row gets one fresh
// claim_id, state 'sending', a lease (next_attempt_at = lease_until, so an
// expired lease is simply due again) and attempts + 1. Rows whose event was
// deleted (NIP-09) or reaped, or that the listener may no longer read (the
// community's rules, and a private channel's membership), are deleted
// instead of claimed. One transaction.
std::vector<claimed_delivery> claim_deliveries(pqxx::connection& conn,
                                               const std::vector<listener_room>& rooms, size_t n,
                                               const claim_settings& settings = {});

// What a connection that claims runs first (db::session's setup). Generic
// plans, kept, and no sequential scans, as the writers (db/statistics.hpp):
// the claim is planned at its first execution, often with the outbox empty.
// Then one call of waggle_listener_may_read compiles the function and plans
// its query, which the first claim that finds a row paid otherwise: 4-7 ms in
// the server, the slowest wake of a benchmark run (docs/benchmarks.md).
const std::vector<std::string>& claim_session_setup();

// The same with room `n` for every listener.
std::vector<claimed_delivery> claim_deliveries(pqxx::connection& conn,
                                               const std::vector<std::string>& listeners,
                                               size_t n, const claim_settings& settings = {});

// The same claims inside the caller's transaction (no COMMIT): the claimed
// rows stay locked until it ends (tests hold a claim open this way).
std::vector<claimed_delivery> claim_deliveries(pqxx::work& tx,
                                               const std::vector<listener_room>& rooms, size_t n,
                                               const claim_settings& settings = {});
std::vector<claimed_delivery> claim_deliveries(pqxx::work& tx,
                                               const std::vector<std::string>& listeners,
                                               size_t n, const claim_settings& settings = {});

enum class completion : uint8_t {
  delivered,  // 2xx: the row is deleted
  retry,      // scheduled again after `retry_after`; deleted instead at max_attempts (dropped)
  terminal,   // the listener refused it for good: deleted
};

enum class completion_result : uint8_t {
  done,     // as asked
  dropped,  // a retry past max_attempts or the retention: deleted instead
  fenced,   // the claim_id no longer holds the row: nothing changed
};

// Completes one claimed row, fenced by (id, claim_id, state 'sending').
completion_result complete_delivery(pqxx::connection& conn, const claimed_delivery& row,
                                    completion how, std::chrono::milliseconds retry_after,
                                    const claim_settings& settings = {});

// Deletes outbox rows older than `retention` (every state); returns how many.
size_t reap_outbox(pqxx::connection& conn, std::chrono::seconds retention);

// For the queue-age gauge: seconds since the oldest pending or sending row
// was written (0 when empty), and when the earliest row a claim could take
// is due (seconds from now, may be negative; nullopt when none): rows past
// max_attempts or the retention never are, and counting them would make the
// supervisor claim in a loop until the reaper took them. `due_for` (default:
// all of `listeners`) limits the due reading to listeners with room: a
// listener at its in-flight cap is claimed for when a slot frees, and its
// due rows must not arm a claim that could not take them.
struct outbox_state {
  double oldest_age_seconds = 0;
  std::optional<double> next_due_in_seconds;
  size_t rows = 0;
};
outbox_state read_outbox_state(pqxx::connection& conn, const std::vector<std::string>& listeners,
                               const claim_settings& settings = {},
                               const std::vector<std::string>* due_for = nullptr);

}  // namespace waggle::db
