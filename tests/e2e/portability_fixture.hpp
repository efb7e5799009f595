#pragma once

// What the export/import tests share (docs/portability.md): fresh migrated
// databases with one open community each, a relay key file per database
// (each "node" signs with its own key), the event_loader over one of them,
// and the export of a community as the lines `waggle export` writes.
// Needs WAGGLE_TEST_DATABASE_URL (fails, never skips, without it).

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <pqxx/pqxx>

#include "actors/node/event_loader.hpp"
#include "actors/support/log.hpp"
#include "db/community_store.hpp"
#include "db/event_export.hpp"
#include "messages/proto/event.hpp"
#include "tests/support/event_builder.hpp"
#include "tests/support/pg_fixture.hpp"

namespace waggle::portability_test {

using pgtest::scratch_database;

// One relay's side: its database, community and key.
struct relay_side {
  std::unique_ptr<scratch_database> db;
  std::string host;
  int64_t community_id = 0;
  std::string key_file;
  std::string relay_secret;  // the key file's content
  std::string relay_pubkey;
};

class PortabilityTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_FALSE(pgtest::admin_url().empty()) << "WAGGLE_TEST_DATABASE_URL is not set";
    log::set_level(log::level::warn);
    dir_ = std::filesystem::temp_directory_path()
           / ("waggle-port-" + std::to_string(::getpid()) + "-" + std::to_string(counter_++));
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }

  // A fresh database with one open community `host`, and a key file holding
  // the secret `key_n` (test::secret), so a test can sign as that relay.
  relay_side side(const std::string& host, int key_n) {
    relay_side s;
    s.db = std::make_unique<scratch_database>("port", scratch_database::content::migrated);
    s.host = host;
    auto conn = s.db->connect();
    auto c = db::add_community(*conn, host, host, community_policy::open);
    EXPECT_TRUE(c.has_value());
    s.community_id = c.has_value() ? c->id : 0;
    s.relay_secret = test::secret(key_n);
    s.relay_pubkey = proto::pubkey_of(s.relay_secret);
    s.key_file = (dir_ / (host + ".key")).string();
    std::ofstream{s.key_file} << s.relay_secret << "\n";
    std::filesystem::permissions(s.key_file, std::filesystem::perms::owner_read
                                                | std::filesystem::perms::owner_write);
    return s;
  }

  static loader_config config_for(const relay_side& s) {
    loader_config cfg;
    cfg.node.database_url = s.db->url();
    cfg.node.relay_key_file = s.key_file;
    cfg.node.port = 0;
    cfg.node.readers = 1;
    cfg.community = s.host;
    return cfg;
  }

  // Loads `lines` into `s` through one event_loader, which settles and stops
  // when it goes.
  static std::vector<load_result> load(const relay_side& s, const std::vector<std::string>& lines) {
    event_loader loader{config_for(s)};
    EXPECT_EQ(loader.relay_pubkey(), s.relay_pubkey);
    return loader.load(lines);
  }

  // `waggle export`'s lines, as of `now`.
  static std::vector<std::string> export_lines(const relay_side& s, int64_t now) {
    std::vector<std::string> out;
    auto conn = s.db->connect();
    db::export_events(*conn, s.community_id, {}, now, 100,
                      [&](std::string_view raw) { out.emplace_back(raw); });
    return out;
  }

  static size_t count_of(const std::vector<load_result>& results, load_status st) {
    size_t n = 0;
    for (const auto& r : results)
      n += r.status == st;
    return n;
  }

  // The live rows of `kind` in `s`'s community, parsed.
  static std::vector<proto::event> live_of_kind(const relay_side& s, int32_t kind) {
    std::vector<proto::event> out;
    auto conn = s.db->connect();
    pqxx::nontransaction tx(*conn);
    for (const auto& row : tx.exec_params("SELECT raw FROM events WHERE community_id = $1 AND "
                                          "kind = $2 AND deleted_at IS NULL ORDER BY raw",
                                          s.community_id, kind)) {
      auto ev = proto::parse_event(row[0].as<std::string>());
      EXPECT_TRUE(ev.has_value());
      if (ev)
        out.push_back(*ev);
    }
    return out;
  }

  std::filesystem::path dir_;
  static inline int counter_ = 0;
};

inline int64_t wall_now() { return pgtest::wall_now(); }

inline proto::event signed_by(int signer, int32_t kind, int64_t at,
                              std::vector<proto::tag> tags = {}, std::string content = "") {
  return pgtest::make_event(signer, kind, at, std::move(tags), std::move(content));
}

}  // namespace waggle::portability_test
