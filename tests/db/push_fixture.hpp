#pragma once

// The fixture of the push tests (tests/db/push_*_test.cpp): lease events,
// chat posts, and row counts of the push tables.

#include <atomic>
#include <ctime>
#include <string>
#include <vector>

#include "db/membership_store.hpp"
#include "db/push_store.hpp"
#include "tests/support/pg_fixture.hpp"

namespace waggle::pgtest {

inline std::string pkey(int n) { return proto::pubkey_of(secret(n)); }

inline int64_t push_now() { return static_cast<int64_t>(std::time(nullptr)); }

// A distinct created_at per event (ids never collide), inside the relay's
// created_at window (the backfill's bound).
inline int64_t push_time() {
  static std::atomic<int64_t> n{0};
  return push_now() - 600 + n++;
}

struct lease_spec {
  std::string installation = "phone";
  std::string endpoint = "grant-1";
  int64_t generation = 1;
  int64_t expires_in = 3600;
  std::vector<std::string> channels{};
  std::vector<std::string> kinds{};
  std::vector<std::string> mutes{};
  std::optional<int64_t> created_at{};
};

inline proto::event lease_event(int author, const lease_spec& s) {
  std::vector<proto::tag> tags = {{"d", s.installation},
                                  {"endpoint", s.endpoint},
                                  {"app", "waggle-ios"},
                                  {"expiration", std::to_string(push_now() + s.expires_in)},
                                  {"generation", std::to_string(s.generation)}};
  for (const auto& c : s.channels)
    tags.push_back({"channel", c});
  for (const auto& k : s.kinds)
    tags.push_back({"k", k});
  for (const auto& m : s.mutes)
    tags.push_back({"mute", m});
  return make_event(author, proto::push::kind_lease, s.created_at.value_or(push_time()), tags);
}

inline proto::event chat(int author, const std::string& text = "hello",
                         std::vector<proto::tag> tags = {}) {
  return make_event(author, 9, push_time(), std::move(tags), text);
}

class PushTest : public PgTest {
 protected:
  write_result lease(int64_t c, int author, const lease_spec& s,
                     const std::vector<std::string>& skipped = {}) {
    return db::accept_lease_event(conn(), ingest_item{c, ptr(lease_event(author, s))}, {}, {},
                                  skipped, push_now());
  }
  write_result lease_on(pqxx::connection& cn, int64_t c, int author, const lease_spec& s) {
    return db::accept_lease_event(cn, ingest_item{c, ptr(lease_event(author, s))}, {}, {}, {},
                                  push_now());
  }
  write_outcome post(int64_t c, const proto::event& ev) {
    return db::write_batch(conn(), batch(c, {ev})).at(0).outcome;
  }
  int64_t count(const std::string& sql) {
    pqxx::nontransaction tx(conn());
    return tx.exec(sql)[0][0].as<int64_t>();
  }
  int64_t jobs(int64_t c) {
    return count("SELECT count(*) FROM push_match_queue WHERE community_id = " + std::to_string(c));
  }
  int64_t wakes(int64_t c, const std::string& where = "TRUE") {
    return count("SELECT count(*) FROM push_wake_outbox WHERE community_id = " + std::to_string(c) +
                 " AND " + where);
  }
  bool has_job(int64_t c, const std::string& event_hex) {
    return count("SELECT count(*) FROM push_match_queue WHERE community_id = " + std::to_string(c) +
                 " AND event_id = decode('" + event_hex + "', 'hex')") == 1;
  }
  // Pushes every existing job's due time into the past (tests claim at once).
  void make_due() {
    pqxx::nontransaction tx(conn());
    tx.exec("UPDATE push_match_queue SET next_attempt_at = now() - interval '1 second'");
  }
  // Jobs of other tests must not be claimed by this one: each test empties
  // the queue of every community but its own before claiming.
  void only_community(int64_t c) {
    pqxx::nontransaction tx(conn());
    tx.exec("DELETE FROM push_match_queue WHERE community_id <> " + std::to_string(c));
    tx.exec("DELETE FROM push_wake_outbox WHERE community_id <> " + std::to_string(c));
  }
};

}  // namespace waggle::pgtest
