#include "db/nip98_tokens.hpp"

namespace waggle::db {

bool use_nip98_token(pqxx::transaction_base& tx, const std::string& token, int64_t expires_at) {
  // The expired rows go in the same statement: the table holds about a
  // minute of tokens, so the delete reads a few index entries.
  auto r = tx.exec_params(
    "WITH expired AS (DELETE FROM nip98_tokens_used WHERE expires_at < now()) "
    "INSERT INTO nip98_tokens_used (token, expires_at) "
    "VALUES (decode($1, 'hex'), to_timestamp($2)) ON CONFLICT (token) DO NOTHING",
    token, expires_at);
  return r.affected_rows() == 1;
}

}  // namespace waggle::db
