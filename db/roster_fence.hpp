#pragma once

// Start-up verification of the roster fence (migrations/0003_roster_fence.sql)
// and the list of stored rosters that need a repair. The node refuses to
// serve unless check_roster_fence passes on its writer connections
// (docs/channels.md, "Fail-closed start-up").

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <pqxx/connection>

#include "messages/proto/status.hpp"

namespace waggle::db {

inline constexpr const char* roster_fence_migration = "0003_roster_fence";

// Catalog check: trigger `waggle_roster_fence` exists on `events`, is BEFORE
// INSERT FOR EACH ROW, is enabled (tgenabled 'O' or 'A') and is bound to the
// function `waggle_roster_fence()`. Errors are ec::internal and name the
// migration and the fix (re-apply migrations/0003_roster_fence.sql).
status verify_roster_fence_catalog(pqxx::connection& conn);

// Behavioural check, in ONE transaction that is always rolled back: a scratch
// community, channel and member; a canonical 39002 must insert; a stale one
// (a member missing) must fail with SQLSTATE 23514. Catches an inert
// function body or a session that does not fire triggers
// (session_replication_role = replica). Errors as above.
status probe_roster_fence(pqxx::connection& conn);

// Both, catalog first.
status check_roster_fence(pqxx::connection& conn);

// Live channels whose live 39002 by `relay_pubkey` (hex) is missing or differs
// from channel_members (waggle_roster_mismatch is not NULL), ordered by
// (community_id, id).
std::vector<std::pair<int64_t, std::string>> stale_rosters(pqxx::connection& conn,
                                                           const std::string& relay_pubkey);

}  // namespace waggle::db
