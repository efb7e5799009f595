// Must-show 5 of issue 12 (NIP-40), on a whole node over real sockets: an
// event expiring 2 s from now is served by REQ, COUNT and an ids lookup, then
// (from its expiration second on) by none of them, then reaped (the row is
// gone). The waits poll with a deadline; only time itself is waited for.

#include "tests/e2e/node_fixture.hpp"

namespace waggle::e2e {
namespace {

using clock = std::chrono::steady_clock;

class ExpirationE2E : public node_e2e {
 protected:
  // The count a COUNT frame answers, or -1.
  int64_t count(gateway::ws_client& c, const std::string& filter) {
    c.send_text(R"(["COUNT","n",)" + filter + "]");
    while (auto f = c.read_text(10s)) {
      auto d = parse(*f);
      if (d.IsArray() && d.Size() == 3 && std::string(d[0].GetString()) == "COUNT")
        return d[2]["count"].GetInt64();
    }
    return -1;
  }
  bool row_exists(const std::string& id) {
    auto conn = db_->connect();
    pqxx::nontransaction tx(*conn);
    return !tx.exec_params("SELECT 1 FROM events WHERE id = decode($1, 'hex')", id).empty();
  }
};

TEST_F(ExpirationE2E, AnEventIsServedThenHiddenThenReaped) {
  auto a = login("alpha.test", alice);
  const int64_t expires = unix_now() + 2;
  auto ev = signed_event(alice, 1, "this message self-destructs",
                         {{"t", "nip40-e2e"}, {"expiration", std::to_string(expires)}});
  ASSERT_EQ(publish(*a, ev), proto::render_ok(ev.id, true, ""));
  auto already = signed_event(alice, 1, "too late",
                              {{"expiration", std::to_string(unix_now() - 1)}});
  EXPECT_EQ(publish(*a, already), proto::render_ok(already.id, false, "invalid: event has expired"));

  const std::string by_id = R"({"ids":[")" + ev.id + R"("]})";
  const std::string by_tag = R"({"#t":["nip40-e2e"]})";
  const std::string by_author = R"({"authors":[")" + ev.pubkey + R"("],"kinds":[1]})";
  ASSERT_LT(unix_now(), expires) << "the machine took 2 s to publish one event; nothing to show";
  EXPECT_EQ(history(*a, "id", by_id), std::vector<std::string>{ev.id});
  EXPECT_EQ(history(*a, "tag", by_tag), std::vector<std::string>{ev.id});
  EXPECT_EQ(count(*a, by_id), 1);
  EXPECT_EQ(count(*a, by_tag), 1);
  ASSERT_LT(unix_now(), expires) << "the served checks ran past the expiry; rerun on a quieter machine";

  // Hidden from the expiration second on, by every read path; never before.
  auto deadline = clock::now() + 10s;
  while (history(*a, "poll", by_id) == std::vector<std::string>{ev.id} && clock::now() < deadline)
    std::this_thread::sleep_for(50ms);
  EXPECT_GE(unix_now(), expires) << "hidden before it expired";
  EXPECT_EQ(history(*a, "id2", by_id), std::vector<std::string>{});
  EXPECT_EQ(history(*a, "tag2", by_tag), std::vector<std::string>{});
  auto mine = history(*a, "author2", by_author);
  EXPECT_EQ(std::find(mine.begin(), mine.end(), ev.id), mine.end());
  EXPECT_EQ(count(*a, by_id), 0);
  EXPECT_EQ(count(*a, by_tag), 0);

  // Then reaped (--expiry-reap-seconds 1 in this fixture).
  deadline = clock::now() + 15s;
  while (row_exists(ev.id) && clock::now() < deadline)
    std::this_thread::sleep_for(100ms);
  EXPECT_FALSE(row_exists(ev.id)) << "not reaped within 15 s";
}

}  // namespace
}  // namespace waggle::e2e
