#pragma once

// Shared fixture of the PostgreSQL-backed tests (tests/db).
//
// WAGGLE_TEST_DATABASE_URL names a server where the user may CREATE DATABASE
// (e.g. postgresql://postgres@127.0.0.1:15434/postgres). Unset or unreachable
// is a test FAILURE, never a skip (docs/testing.md).
//
// Every test process creates its own fresh database (name: pid + counter),
// cloned from a migrated template (migrated_template() below), and drops it
// at exit, so binaries (and ctest's one-process-per-test runs) can go in
// parallel under ctest -j.
// Tests inside one database keep apart by using their own community.

#include <gtest/gtest.h>

#include <unistd.h>

#include <atomic>
#include <cctype>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <pqxx/errorhandler>
#include <pqxx/pqxx>

#include "db/community_store.hpp"
#include "db/batch_bisect.hpp"
#include "db/event_store.hpp"
#include "db/migrate.hpp"
#include "messages/proto/event.hpp"
#include "messages/proto/nip98.hpp"
#include "tests/support/event_builder.hpp"

namespace waggle::pgtest {

// The wall clock in unix seconds: the `now` reads take (NIP-40 expiry), for
// tests that do not care what time it is.
inline int64_t wall_now() {
  using namespace std::chrono;
  return duration_cast<seconds>(system_clock::now().time_since_epoch()).count();
}

// Late rows leave their community a mark up to a second ahead of the insert
// (migration 0010): a proof taken before the database clock passes it keeps
// covered reads of the community on the writer. Waits until it has passed.
inline bool wait_past_late_marks(pqxx::connection& conn, int64_t community_id) {
  for (int i = 0; i < 100; ++i) {
    pqxx::nontransaction tx(conn);
    if (tx.exec("SELECT coalesce(max(last_at) < clock_timestamp(), true) FROM history_backfill "
                "WHERE community_id = " + std::to_string(community_id))
          .at(0).at(0).as<bool>())
      return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return false;
}

inline std::string admin_url() {
  const char* u = std::getenv("WAGGLE_TEST_DATABASE_URL");
  return u ? std::string(u) : std::string();
}

// The URL with its database name replaced by `db` (query parameters kept).
inline std::string url_with_database(const std::string& url, const std::string& db) {
  auto scheme = url.find("://");
  if (scheme == std::string::npos)
    return "dbname=" + db + " " + url;  // keyword/value form: the last dbname wins
  auto path = url.find('/', scheme + 3);
  auto query = url.find('?', scheme + 3);
  std::string head = url.substr(0, std::min(path, query));
  std::string tail = query == std::string::npos ? "" : url.substr(query);
  return head + "/" + db + tail;
}

// The name of a database holding exactly the embedded migrations, made once
// per set of migrations (the name carries their digest) by the first test
// process that asks; an advisory lock keeps the others waiting until it is
// complete. Cloning it (CREATE DATABASE ... TEMPLATE) takes a fraction of the
// ~2 s that applying the migrations to a fresh database took, in every one of
// the hundreds of PostgreSQL-backed test processes of a run. Built under a
// temporary name and renamed when complete, so a process that died half-way
// leaves nothing anyone clones. Templates of other migration sets are dropped.
inline std::string migrated_template() {
  static const std::string name = [] {
    std::string checksums;
    for (const auto& m : db::embedded_migrations())
      checksums += m.name + ":" + m.checksum + "\n";
    const std::string final_name = "waggle_test_template_" + proto::sha256_hex(checksums).substr(0, 16);
    const std::string building = final_name + "_building";
    pqxx::connection admin(admin_url());
    pqxx::nontransaction tx(admin);
    tx.exec("SELECT pg_advisory_lock(hashtext('waggle_test_template'))");
    if (tx.exec("SELECT 1 FROM pg_database WHERE datname = " + tx.quote(final_name)).empty()) {
      tx.exec("DROP DATABASE IF EXISTS " + tx.quote_name(building) + " WITH (FORCE)");
      tx.exec("CREATE DATABASE " + tx.quote_name(building) + " TEMPLATE template0 ENCODING 'UTF8'");
      {
        pqxx::connection conn(url_with_database(admin_url(), building));
        auto applied = db::apply_migrations(conn, db::embedded_migrations());
        if (!applied)
          throw std::runtime_error("migrations failed on the test template: " + applied.error().reason);
      }
      // Waits (up to 5 s) for the migrating session above to be gone.
      tx.exec("ALTER DATABASE " + tx.quote_name(building) + " RENAME TO " + tx.quote_name(final_name));
      for (const auto& row : tx.exec("SELECT datname FROM pg_database WHERE datname LIKE "
                                     "'waggle\\_test\\_template\\_%' AND datname <> " + tx.quote(final_name)))
        tx.exec("DROP DATABASE IF EXISTS " + tx.quote_name(row[0].as<std::string>()) + " WITH (FORCE)");
    }
    tx.exec("SELECT pg_advisory_unlock(hashtext('waggle_test_template'))");
    return final_name;
  }();
  return name;
}

// A database that exists for the lifetime of this object: empty (from
// template0), or with every migration applied (a clone of migrated_template()).
class scratch_database {
 public:
  enum class content { empty, migrated };

  explicit scratch_database(const std::string& purpose, content what = content::empty) {
    static std::atomic<int> counter{0};
    name_ = "waggle_test_" + purpose + "_" + std::to_string(::getpid()) + "_" +
            std::to_string(counter++);
    const std::string source = what == content::migrated ? migrated_template() : "template0";
    pqxx::connection admin(admin_url());
    pqxx::nontransaction tx(admin);
    tx.exec("CREATE DATABASE " + tx.quote_name(name_) + " TEMPLATE " + tx.quote_name(source) +
            " ENCODING 'UTF8'");
    url_ = url_with_database(admin_url(), name_);
  }
  ~scratch_database() {
    try {
      pqxx::connection admin(admin_url());
      pqxx::nontransaction tx(admin);
      tx.exec("DROP DATABASE IF EXISTS " + tx.quote_name(name_) + " WITH (FORCE)");
    } catch (const std::exception& e) {
      std::fprintf(stderr, "could not drop %s: %s\n", name_.c_str(), e.what());
    }
  }
  scratch_database(const scratch_database&) = delete;
  scratch_database& operator=(const scratch_database&) = delete;

  const std::string& url() const { return url_; }
  const std::string& name() const { return name_; }
  std::unique_ptr<pqxx::connection> connect() const {
    return std::make_unique<pqxx::connection>(url_);
  }

 private:
  std::string name_;
  std::string url_;
};

// The process-wide migrated database, created on first use.
struct shared_db {
  std::unique_ptr<scratch_database> db;
  std::string error;

  static shared_db& get() {
    static shared_db instance = [] {
      shared_db s;
      if (admin_url().empty()) {
        s.error = "WAGGLE_TEST_DATABASE_URL is not set (a PostgreSQL URL where CREATE DATABASE "
                  "is allowed, e.g. postgresql://postgres@127.0.0.1:15434/postgres)";
        return s;
      }
      try {
        s.db = std::make_unique<scratch_database>("shared", scratch_database::content::migrated);
        auto conn = s.db->connect();
        // A no-op on the clone that still checks it: every migration applied, checksums equal.
        auto applied = db::apply_migrations(*conn, db::embedded_migrations());
        if (!applied)
          s.error = "migrations failed: " + applied.error().reason;
      } catch (const std::exception& e) {
        s.error = std::string("cannot prepare the test database: ") + e.what();
      }
      return s;
    }();
    return instance;
  }
};

class PgTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto& s = shared_db::get();
    ASSERT_TRUE(s.error.empty()) << s.error;
    conn_ = s.db->connect();
  }

  pqxx::connection& conn() { return *conn_; }
  std::unique_ptr<pqxx::connection> connect() { return shared_db::get().db->connect(); }
  const std::string& url() { return shared_db::get().db->url(); }

  // A community of its own for the calling test.
  int64_t community(const std::string& tag = "") {
    static std::atomic<int> n{0};
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    std::string host = std::string(info->test_suite_name()) + "-" + info->name() + "-" + tag +
                       "-" + std::to_string(n++) + ".test";
    for (auto& c : host)
      c = (std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-') ? c : '-';
    auto r = db::add_community(conn(), host, "test community", community_policy::open);
    EXPECT_TRUE(r.has_value()) << (r.has_value() ? "" : r.error().reason);
    return r.has_value() ? r->id : 0;
  }

  // Row helpers (hex in, plain values out).
  int64_t live_rows(int64_t community_id, const std::string& extra_where = "TRUE") {
    pqxx::nontransaction tx(conn());
    return tx.exec_params("SELECT count(*) FROM events WHERE community_id = $1 AND deleted_at IS NULL AND " +
                            extra_where,
                          community_id)[0][0]
      .as<int64_t>();
  }
  int64_t all_rows(int64_t community_id) {
    pqxx::nontransaction tx(conn());
    return tx.exec_params("SELECT count(*) FROM events WHERE community_id = $1", community_id)[0][0]
      .as<int64_t>();
  }
  bool is_live(int64_t community_id, const std::string& id_hex) {
    pqxx::nontransaction tx(conn());
    auto r = tx.exec_params(
      "SELECT deleted_at IS NULL FROM events WHERE community_id = $1 AND id = decode($2, 'hex')",
      community_id, id_hex);
    return !r.empty() && r[0][0].as<bool>();
  }
  bool exists(int64_t community_id, const std::string& id_hex) {
    pqxx::nontransaction tx(conn());
    return !tx.exec_params("SELECT 1 FROM events WHERE community_id = $1 AND id = decode($2, 'hex')",
                           community_id, id_hex)
              .empty();
  }
  int64_t tag_rows(int64_t community_id, const std::string& id_hex) {
    pqxx::nontransaction tx(conn());
    return tx.exec_params(
               "SELECT count(*) FROM event_tags WHERE community_id = $1 AND event_id = decode($2, "
               "'hex')",
               community_id, id_hex)[0][0]
      .as<int64_t>();
  }

  std::unique_ptr<pqxx::connection> conn_;
};

// ---- events -------------------------------------------------------------------

// A valid secp256k1 secret: 32 bytes hex of a small number (1-based).
inline std::string secret(int n) { return test::secret(n); }

inline proto::event make_event(int signer, int32_t kind, int64_t created_at,
                               std::vector<proto::tag> tags = {}, std::string content = "") {
  return test::event_builder{secret(signer)}.kind(kind).at(created_at).tags(std::move(tags))
    .content(std::move(content)).sign();
}

inline event_ptr ptr(const proto::event& ev) { return std::make_shared<const proto::event>(ev); }

inline std::vector<ingest_item> batch(int64_t community_id, const std::vector<proto::event>& evs) {
  std::vector<ingest_item> out;
  for (const auto& ev : evs)
    out.push_back({community_id, ptr(ev)});
  return out;
}

inline const char* outcome_name(write_outcome o) {
  switch (o) {
    case write_outcome::stored: return "stored";
    case write_outcome::duplicate: return "duplicate";
    case write_outcome::superseded: return "superseded";
    case write_outcome::rejected: return "rejected";
    case write_outcome::refused: return "refused";
    case write_outcome::failed: return "failed";
    case write_outcome::blocked: return "blocked";
    case write_outcome::rate_limited: return "rate_limited";
  }
  return "?";
}

// Collects the notices (WARNINGs included) a connection receives while it
// lives, e.g. what a PL/pgSQL RAISE WARNING reports.
class notice_collector : public pqxx::errorhandler {
 public:
  explicit notice_collector(pqxx::connection_base& c) : pqxx::errorhandler(c) {}
  bool operator()(const char msg[]) noexcept override {
    try {
      std::lock_guard lk(m_);
      text_ += msg;
    } catch (...) {
    }
    return false;
  }
  std::string text() {
    std::lock_guard lk(m_);
    return text_;
  }

 private:
  std::mutex m_;
  std::string text_;
};

// A one-shot gate: open() once, wait() until it is open.
class gate {
 public:
  void open() {
    {
      std::lock_guard lk(m_);
      open_ = true;
    }
    cv_.notify_all();
  }
  void wait() {
    std::unique_lock lk(m_);
    cv_.wait(lk, [&] { return open_; });
  }
  bool wait_for(std::chrono::milliseconds d) {
    std::unique_lock lk(m_);
    return cv_.wait_for(lk, d, [&] { return open_; });
  }

 private:
  std::mutex m_;
  std::condition_variable cv_;
  bool open_ = false;
};

// Opens a gate when it goes out of scope. Declare it AFTER the threads that
// wait on the gate: it is destroyed first, so they can finish and be joined
// whatever the test did (a failed ASSERT never leaves a worker blocked).
struct open_on_exit {
  gate& g;
  ~open_on_exit() { g.open(); }
};

// Polls `cond` until true or `timeout`; true when it became true.
inline bool eventually(const std::function<bool()>& cond,
                       std::chrono::milliseconds timeout = std::chrono::seconds(10)) {
  auto until = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < until) {
    if (cond())
      return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return cond();
}

// True when backend `pid` is waiting for an advisory lock.
inline bool waits_on_advisory_lock(pqxx::connection& observer, int pid) {
  pqxx::nontransaction tx(observer);
  auto r = tx.exec_params(
    "SELECT 1 FROM pg_locks WHERE pid = $1 AND locktype = 'advisory' AND NOT granted", pid);
  return !r.empty();
}

}  // namespace waggle::pgtest

namespace waggle::db {
inline void PrintTo(write_outcome o, std::ostream* os) { *os << pgtest::outcome_name(o); }
}  // namespace waggle::db
