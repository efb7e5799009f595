// The read path's prepared statements (db/prepared_reads.hpp): a reader
// session's history and count statements are prepared once per shape and
// answer exactly what the unprepared ones answer; the set a connection holds
// stays bounded however many shapes clients send.

#include <pqxx/nontransaction>

#include "db/event_store.hpp"
#include "db/prepared_reads.hpp"
#include "messages/proto/filter.hpp"
#include "tests/support/pg_fixture.hpp"

namespace waggle::pgtest {
namespace {

class PreparedReadsTest : public PgTest {
 protected:
  int64_t prepared_here() {
    pqxx::nontransaction tx(conn());
    return tx.exec("SELECT count(*) FROM pg_prepared_statements WHERE name LIKE 'waggle_read_%'")[0][0]
      .as<int64_t>();
  }
  void seed(int64_t community_id, int rows) {
    pqxx::nontransaction tx(conn());
    tx.exec_params(
      "INSERT INTO events (community_id, id, pubkey, created_at, kind, raw) "
      "SELECT $1::bigint, sha256(($1::bigint || '-' || i)::text::bytea), sha256(('pk' || i % 3)::text::bytea), "
      "1700000000 + i / 2, 1 + i % 2, '{\"n\":' || i || '}' FROM generate_series(1, $2::int) AS i",
      community_id, rows);
  }
  static proto::filter f(const std::string& json) { return *proto::parse_filter(json, {}); }
};

TEST_F(PreparedReadsTest, prepared_reads_answer_what_unprepared_ones_do_and_each_shape_is_prepared_once) {
  auto c = community("same");
  seed(c, 40);
  db::prepared_reads prepared;
  ASSERT_EQ(db::query_events(conn(), c, {f(R"({"kinds":[1],"limit":5})")}, {}, 0).size(), 5u);
  const std::vector<std::vector<proto::filter>> shapes{
    {f(R"({"kinds":[1],"limit":5})")},
    {f(R"({"kinds":[1,2],"limit":7})")},
    {f(R"({"limit":9})")},
    {f(R"({"kinds":[2],"limit":3})"), f(R"({"since":1700000010,"limit":4})")},
  };
  for (int round = 0; round < 2; ++round)
    for (const auto& fs : shapes) {
      EXPECT_EQ(db::query_events_page(conn(), c, fs, {}, 0, {}, nullptr, &prepared).raws,
                db::query_events(conn(), c, fs, {}, 0));
      EXPECT_EQ(db::count_events(conn(), c, fs, 0, nullptr, &prepared),
                db::count_events(conn(), c, fs, 0));
    }
  // Two rounds of the same shapes: the second prepared nothing new.
  EXPECT_EQ(static_cast<size_t>(prepared_here()), prepared.size());
  EXPECT_GT(prepared.size(), 0u);
  EXPECT_LE(prepared.size(), 2 * shapes.size() + 1);
}

TEST_F(PreparedReadsTest, a_connection_holds_at_most_capacity_statements_however_many_shapes_come) {
  auto c = community("bound");
  seed(c, 10);
  db::prepared_reads prepared{4};
  // Each `since` is its own statement text: a client choosing shapes.
  for (int i = 0; i < 12; ++i) {
    auto fs = std::vector<proto::filter>{f(R"({"kinds":[1],"since":)" + std::to_string(1700000000 + i) + "}")};
    EXPECT_EQ(db::query_events_page(conn(), c, fs, {}, 0, {}, nullptr, &prepared).raws,
              db::query_events(conn(), c, fs, {}, 0));
  }
  EXPECT_EQ(prepared.size(), 4u);
  EXPECT_EQ(prepared_here(), 4) << "the least recently used were deallocated";
}

TEST_F(PreparedReadsTest, a_new_connection_gets_its_statements_prepared_again) {
  auto c = community("reconnect");
  seed(c, 6);
  db::prepared_reads prepared;
  auto fs = std::vector<proto::filter>{f(R"({"kinds":[2]})")};
  auto expected = db::query_events(conn(), c, fs, {}, 0);
  {
    auto first = connect();
    EXPECT_EQ(db::query_events_page(*first, c, fs, {}, 0, {}, nullptr, &prepared).raws, expected);
  }
  auto second = connect();
  EXPECT_EQ(db::query_events_page(*second, c, fs, {}, 0, {}, nullptr, &prepared).raws, expected);
  EXPECT_EQ(db::query_events_page(*second, c, fs, {}, 0, {}, nullptr, &prepared).raws, expected);
}

}  // namespace
}  // namespace waggle::pgtest
