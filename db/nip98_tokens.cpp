#include "db/nip98_tokens.hpp"

namespace waggle::db {

bool use_nip98_token(pqxx::transaction_base& tx, const std::string& token, int64_t expires_at) {
  // The expired rows go in the same statement (the table holds a few
  // minutes of tokens), SKIP LOCKED: rows another open call is deleting are
  // left to it. Locking them would make every NIP-86 call of every community
  // wait for the slowest call in flight (red team of issue 34).
  // Kept `skew_margin` past the token's end: each node judges a token's
  // freshness by its own clock, the purge by the database's; a node whose
  // clock lags the database would otherwise accept a token whose row is gone.
  auto r = tx.exec_params(
    "WITH expired AS (DELETE FROM nip98_tokens_used WHERE token IN ("
    "    SELECT token FROM nip98_tokens_used WHERE expires_at < now() "
    "     ORDER BY expires_at LIMIT 100 FOR UPDATE SKIP LOCKED)) "
    "INSERT INTO nip98_tokens_used (token, expires_at) "
    "VALUES (decode($1, 'hex'), to_timestamp($2)) ON CONFLICT (token) DO NOTHING",
    token, expires_at + skew_margin_seconds);
  return r.affected_rows() == 1;
}

}  // namespace waggle::db
