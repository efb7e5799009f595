#pragma once

// NIP-98 tokens used for a change, across the cluster (migration 0017,
// docs/management.md, "Replays").

#include <cstdint>
#include <string>

#include <pqxx/transaction_base>

namespace waggle::db {

// Records `token` (the token's signature, 128 hex) as used until
// `expires_at` (unix seconds), in the caller's transaction. True: its first
// use. False: a transaction on this or any node recorded it and committed;
// if that one is still open, this waits for it (bounded by the caller's
// lock_timeout). Expired rows are deleted on the way.
// Rows are kept this long past `expires_at`: a node whose clock lags the
// database's by less still finds a token it would accept.
inline constexpr int64_t skew_margin_seconds = 300;
bool use_nip98_token(pqxx::transaction_base& tx, const std::string& token, int64_t expires_at);

}  // namespace waggle::db
