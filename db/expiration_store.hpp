#pragma once

// NIP-40: hard deletion of expired events (docs/expiration.md). Reads stop
// serving an event the second it expires (db/event_query.cpp); this takes the
// rows away afterwards, for the expiration reaper (actors/expiry/).

#include <cstddef>
#include <cstdint>

#include <pqxx/connection>

namespace waggle::db {

struct reap_limits {
  size_t per_transaction = 1000;  // events deleted in one transaction at most
  size_t transactions = 5;        // transactions in one call at most
};

struct reap_result {
  uint64_t events = 0;        // event rows deleted
  uint64_t transactions = 0;  // transactions committed
  bool more = false;          // stopped at the limit; due rows may remain
};

// Deletes events whose expires_at <= `now` (unix seconds), with their
// event_tags rows, community by community, each transaction at most
// `per_transaction` events. Live, replaced and soft-deleted rows alike: an
// expired row is never served again whatever its state. Rows another
// transaction holds locked (a writer replacing or deleting them) are skipped
// (FOR UPDATE SKIP LOCKED), so the reaper never waits for a writer nor makes
// one wait long: a later call takes them.
// Kept on purpose: the `e` and `a` event_tags rows of an expired kind-5
// deletion. They are the NIP-09 tombstone the write path matches events that
// arrive later against, so a deletion's expiry never lets what it deleted be
// stored again; no read serves them (every read joins events).
// Throws pqxx exceptions; a failed transaction deletes nothing.
reap_result reap_expired_events(pqxx::connection& conn, int64_t now, const reap_limits& limits);

}  // namespace waggle::db
