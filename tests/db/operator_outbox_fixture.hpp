#pragma once

// The fixture of the operator listener outbox tests (tests/db/operator_outbox_*_test.cpp;
// docs/delivery.md, "Outbox"): listeners and targets, the rows of the outbox, and
// the NOTIFY a LISTENing connection receives on the wake channel.

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include <pqxx/notification>

#include "db/operator_outbox.hpp"
#include "tests/db/write_fixture.hpp"

namespace waggle::pgtest {

using namespace std::chrono_literals;

const std::string target1(64, 'a');
const std::string target2(64, 'b');

// Collects what a LISTENing connection receives on the wake channel.
class wake_listener : public pqxx::notification_receiver {
 public:
  explicit wake_listener(pqxx::connection_base& c)
    : pqxx::notification_receiver(c, db::delivery_wake_channel) {}
  void operator()(const std::string& payload, int) override { payloads.push_back(payload); }
  std::vector<std::string> payloads;
};

// A key no other test of this process uses: claims select by listener, and
// the tests of one binary share a database.
inline std::string fresh_listener() {
  static int n = 0;
  char buf[65];
  std::snprintf(buf, sizeof buf, "%064x", ++n);
  return buf;
}

class OutboxTest : public WriteTest {
 protected:
  const std::string listener1 = fresh_listener();
  const std::string listener2 = fresh_listener();

  void register_targets(int64_t c, const std::string& listener,
                        const std::vector<std::string>& targets) {
    db::register_listener_targets(conn(), c, listener, targets);
  }
  int64_t outbox_rows(int64_t c, const std::string& extra_where = "TRUE") {
    pqxx::nontransaction tx(conn());
    return tx.exec_params("SELECT count(*) FROM operator_listener_outbox WHERE community_id = $1 "
                          "AND " + extra_where, c)[0][0].as<int64_t>();
  }
  // Rows of (listener, target) for one event.
  int64_t rows_of(int64_t c, const std::string& listener, const std::string& target,
                  const std::string& event_id) {
    pqxx::nontransaction tx(conn());
    return tx.exec_params("SELECT count(*) FROM operator_listener_outbox WHERE community_id = $1 "
                          "AND listener_pubkey = decode($2, 'hex') AND target_pubkey = "
                          "decode($3, 'hex') AND event_id = decode($4, 'hex')",
                          c, listener, target, event_id)[0][0].as<int64_t>();
  }
  void sql(const std::string& text) {
    pqxx::nontransaction tx(conn());
    tx.exec(text);
  }
  // Sends a marker NOTIFY from another session and returns every payload the
  // listener received before it. Notifications arrive in commit order, so
  // once the marker is in, anything committed before it is in too: no wait
  // for something that should not come.
  std::vector<std::string> before_marker(pqxx::connection& lc, wake_listener& w) {
    sql(std::string("NOTIFY ") + db::delivery_wake_channel + ", 'marker'");
    auto until = std::chrono::steady_clock::now() + 10s;
    while (std::find(w.payloads.begin(), w.payloads.end(), "marker") == w.payloads.end() &&
           std::chrono::steady_clock::now() < until)
      lc.await_notification(0, 100000);
    auto at = std::find(w.payloads.begin(), w.payloads.end(), "marker");
    EXPECT_NE(at, w.payloads.end()) << "the marker never arrived";
    std::vector<std::string> before(w.payloads.begin(), at);
    w.payloads.clear();
    return before;
  }
  // Writes `n` mention events of target1 (kind 9) and returns them.
  std::vector<proto::event> seed(int64_t c, int n, int64_t created_at = 1000) {
    std::vector<proto::event> evs;
    for (int i = 0; i < n; ++i)
      evs.push_back(make_event(1, 9, created_at + i, {{"p", target1}}, "hi " + std::to_string(i)));
    for (const auto& r : write(c, evs))
      EXPECT_EQ(r.outcome, write_outcome::stored);
    return evs;
  }
};

inline proto::event mention(int64_t created_at, std::vector<proto::tag> tags, int32_t kind = 9) {
  return make_event(1, kind, created_at, std::move(tags), "mention");
}

}  // namespace waggle::pgtest
