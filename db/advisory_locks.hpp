#pragma once

// Transaction-scoped advisory locks by text key (docs/lock-protocol.md names
// each key and the order they are taken in). hashtextextended keeps every
// domain in one 64-bit space; the lock ends with the transaction.

#include <string>

#include <pqxx/transaction_base>

namespace waggle::db {

inline void lock_exclusive(pqxx::transaction_base& tx, const std::string& key) {
  tx.exec_params("SELECT pg_advisory_xact_lock(hashtextextended($1, 0))", key);
}

inline void lock_shared(pqxx::transaction_base& tx, const std::string& key) {
  tx.exec_params("SELECT pg_advisory_xact_lock_shared(hashtextextended($1, 0))", key);
}

}  // namespace waggle::db
