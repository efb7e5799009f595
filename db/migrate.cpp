#include "db/migrate.hpp"

#include <openssl/sha.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <optional>
#include <stdexcept>

#include <pqxx/except>
#include <pqxx/nontransaction>
#include <pqxx/result>
#include <pqxx/transaction>

namespace {

struct waggle_embedded_sql_file {
  const char* stem;  // "0001_init"
  const unsigned char* data;
  std::size_t size;
};

#ifdef WAGGLE_HAVE_EMBEDDED_MIGRATIONS
#include "waggle_embedded_migrations.inc"
const waggle_embedded_sql_file* embedded_table() { return waggle_embedded_sql_files; }
#else
// Built without db/embed_migrations.cmake: embedded_migrations() throws, so a
// misconfigured build can never run against an unmigrated database silently.
const waggle_embedded_sql_file* embedded_table() { return nullptr; }
#endif

}  // namespace

namespace waggle::db {

namespace {

std::string sha256_hex(const std::string& s) {
  unsigned char digest[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(s.data()), s.size(), digest);
  static const char* hexdigits = "0123456789abcdef";
  std::string out;
  out.reserve(2 * SHA256_DIGEST_LENGTH);
  for (unsigned char b : digest) {
    out.push_back(hexdigits[b >> 4]);
    out.push_back(hexdigits[b & 15]);
  }
  return out;
}

std::vector<migration> load_embedded() {
  const waggle_embedded_sql_file* table = embedded_table();
  if (table == nullptr)
    throw std::logic_error(
      "waggle was built without embedded migrations: include db/embed_migrations.cmake "
      "from CMakeLists.txt");
  std::vector<migration> out;
  for (auto* f = table; f->stem != nullptr; ++f) {
    migration m;
    m.name = f->stem;
    m.version = std::stoi(m.name.substr(0, 4));
    m.sql.assign(reinterpret_cast<const char*>(f->data), f->size);
    m.checksum = sha256_hex(m.sql);
    out.push_back(std::move(m));
  }
  std::sort(out.begin(), out.end(),
            [](const migration& a, const migration& b) { return a.version < b.version; });
  for (size_t i = 1; i < out.size(); ++i)
    if (out[i].version == out[i - 1].version)
      throw std::logic_error("two embedded migrations share version " +
                             std::to_string(out[i].version) + ": " + out[i - 1].name + ", " +
                             out[i].name);
  return out;
}

// Session-level advisory lock held while migrations are checked and applied,
// so that nodes starting together apply each migration exactly once. The key
// follows the naming of docs/lock-protocol.md: hashtextextended('waggle_migrations', 0).
constexpr const char* lock_sql = "SELECT pg_advisory_lock(hashtextextended('waggle_migrations', 0))";
constexpr const char* unlock_sql =
  "SELECT pg_advisory_unlock(hashtextextended('waggle_migrations', 0))";

// The ledger (also declared in 0001_init.sql, identically).
constexpr const char* bootstrap_sql = R"sql(
CREATE TABLE IF NOT EXISTS schema_migrations (
  version    int PRIMARY KEY,
  name       text NOT NULL,
  checksum   text NOT NULL,
  applied_at timestamptz NOT NULL DEFAULT now()
))sql";

struct applied_row {
  std::string name;
  std::string checksum;
};

// Reads the ledger; an absent ledger means nothing is applied.
std::map<int, applied_row> read_applied(pqxx::connection& conn) {
  pqxx::nontransaction tx(conn);
  std::map<int, applied_row> out;
  auto exists = tx.exec("SELECT to_regclass('schema_migrations') IS NOT NULL");
  if (!exists[0][0].as<bool>())
    return out;
  for (const auto& row : tx.exec("SELECT version, name, checksum FROM schema_migrations"))
    out[row[0].as<int>()] = {row[1].as<std::string>(), row[2].as<std::string>()};
  return out;
}

// Checks the ledger against `all`; returns the first disagreement, if any.
std::optional<std::string> disagreement(const std::map<int, applied_row>& applied,
                                        const std::vector<migration>& all) {
  std::map<int, const migration*> known;
  for (const auto& m : all)
    known[m.version] = &m;
  for (const auto& [version, row] : applied) {
    auto it = known.find(version);
    if (it == known.end())
      return "database has migration " + row.name + " (version " + std::to_string(version) +
             ") that this binary does not know; refusing to run an older binary on a newer schema";
    if (it->second->checksum != row.checksum)
      return "migration " + it->second->name + " was applied with checksum " + row.checksum +
             " but this binary embeds " + it->second->checksum +
             "; an applied migration must never change (add a new migration instead)";
  }
  // A gap (a later migration applied, an earlier one missing) is not repaired
  // silently: the order of migrations is part of their meaning.
  if (!applied.empty()) {
    int newest = applied.rbegin()->first;
    for (const auto& m : all)
      if (m.version < newest && !applied.count(m.version))
        return "migration " + m.name + " is missing although a later migration (version " +
               std::to_string(newest) + ") is applied";
  }
  return std::nullopt;
}

class advisory_guard {
 public:
  explicit advisory_guard(pqxx::connection& conn) : conn_(conn) {
    pqxx::nontransaction tx(conn_);
    tx.exec(lock_sql);
  }
  ~advisory_guard() {
    try {
      pqxx::nontransaction tx(conn_);
      tx.exec(unlock_sql);
    } catch (...) {
      // A broken connection released the session lock already.
    }
  }
  advisory_guard(const advisory_guard&) = delete;
  advisory_guard& operator=(const advisory_guard&) = delete;

 private:
  pqxx::connection& conn_;
};

}  // namespace

const std::vector<migration>& embedded_migrations() {
  static const std::vector<migration> all = load_embedded();
  return all;
}

result<int> apply_migrations(pqxx::connection& conn, const std::vector<migration>& all) {
  std::vector<const migration*> ordered;
  for (const auto& m : all)
    ordered.push_back(&m);
  std::sort(ordered.begin(), ordered.end(),
            [](const migration* a, const migration* b) { return a->version < b->version; });

  advisory_guard lock(conn);
  {
    pqxx::work tx(conn);
    tx.exec(bootstrap_sql);
    tx.commit();
  }
  auto applied = read_applied(conn);
  if (auto why = disagreement(applied, all))
    return make_status(ec::internal, *why);

  int count = 0;
  for (const migration* m : ordered) {
    if (applied.count(m->version))
      continue;
    try {
      pqxx::work tx(conn);
      tx.exec(m->sql);
      tx.exec_params(
        "INSERT INTO schema_migrations (version, name, checksum, applied_at) "
        "VALUES ($1, $2, $3, now())",
        m->version, m->name, m->checksum);
      tx.commit();
    } catch (const pqxx::broken_connection&) {
      throw;
    } catch (const pqxx::sql_error& e) {
      return make_status(ec::internal, "migration " + m->name + " failed (SQLSTATE " +
                                         e.sqlstate() + "): " + e.what());
    }
    ++count;
  }
  return count;
}

bool migrations_current(pqxx::connection& conn, const std::vector<migration>& all) {
  auto applied = read_applied(conn);
  if (disagreement(applied, all))
    return false;
  for (const auto& m : all)
    if (!applied.count(m.version))
      return false;
  return true;
}

}  // namespace waggle::db
