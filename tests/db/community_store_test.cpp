// Communities (tenants): host normalisation, idempotent case-insensitive add.

#include <latch>
#include <thread>

#include "tests/support/pg_fixture.hpp"

namespace waggle::pgtest {
namespace {

TEST(NormalizeHost, LowercasesAndStripsThePort) {
  EXPECT_EQ(normalize_host("Chat.Example.COM"), "chat.example.com");
  EXPECT_EQ(normalize_host("chat.example.com:7777"), "chat.example.com");
  EXPECT_EQ(normalize_host("[::1]:7777"), "[::1]");
  EXPECT_EQ(normalize_host("[::1]"), "[::1]");
  EXPECT_EQ(normalize_host("[FE80::1]:80"), "[fe80::1]");
  EXPECT_EQ(normalize_host("::1"), "::1");
  EXPECT_EQ(normalize_host("example.com."), "example.com");
  EXPECT_EQ(normalize_host("  example.com  "), "example.com");
  EXPECT_EQ(normalize_host("127.0.0.1:80"), "127.0.0.1");
  EXPECT_EQ(normalize_host(""), "");
}

class CommunityTest : public PgTest {};

TEST_F(CommunityTest, AddIsIdempotentAndCaseInsensitive) {
  auto a = db::add_community(conn(), "Team.Example.ORG:443", "Team");
  ASSERT_TRUE(a.has_value()) << a.error().reason;
  EXPECT_EQ(a->host, "team.example.org");
  EXPECT_EQ(a->name, "Team");
  EXPECT_FALSE(a->archived);
  auto b = db::add_community(conn(), "team.example.org", "Another name");
  ASSERT_TRUE(b.has_value());
  EXPECT_EQ(*b, *a) << "an existing host returns the existing community unchanged";
  auto all = db::load_communities(conn());
  EXPECT_EQ(std::count_if(all.begin(), all.end(),
                          [&](const waggle::community& c) { return c.host == "team.example.org"; }),
            1);
}

TEST_F(CommunityTest, CaseInsensitiveUniquenessHoldsInTheSchema) {
  ASSERT_TRUE(db::add_community(conn(), "unique.example.org", "").has_value());
  pqxx::work tx(conn());
  EXPECT_THROW(tx.exec("INSERT INTO communities (host) VALUES ('UNIQUE.example.org')"),
               pqxx::unique_violation);
}

TEST_F(CommunityTest, EmptyOrInvalidHostIsRefused) {
  auto r = db::add_community(conn(), "  ", "x");
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().code, ec::invalid);
  EXPECT_FALSE(db::add_community(conn(), "a b.example", "x").has_value());
}

TEST_F(CommunityTest, LoadReportsArchivedCommunities) {
  auto a = db::add_community(conn(), "archived.example.org", "old");
  ASSERT_TRUE(a.has_value());
  {
    pqxx::work tx(conn());
    tx.exec_params("UPDATE communities SET archived_at = now() WHERE id = $1", a->id);
    tx.commit();
  }
  auto all = db::load_communities(conn());
  auto it = std::find_if(all.begin(), all.end(), [&](const waggle::community& c) { return c.id == a->id; });
  ASSERT_NE(it, all.end());
  EXPECT_TRUE(it->archived);
  EXPECT_TRUE(db::add_community(conn(), "ARCHIVED.example.org", "")->archived);
}

TEST_F(CommunityTest, ConcurrentAddsOfOneHostReturnOneCommunity) {
  constexpr int n = 6;
  std::vector<std::unique_ptr<pqxx::connection>> conns;
  for (int i = 0; i < n; ++i)
    conns.push_back(connect());
  std::latch go(n);
  std::vector<int64_t> ids(n, 0);
  std::vector<std::thread> ts;
  for (int i = 0; i < n; ++i)
    ts.emplace_back([&, i] {
      go.arrive_and_wait();
      auto r = db::add_community(*conns[i], i % 2 ? "Race.Example.org" : "race.example.ORG:1", "r");
      ids[i] = r.has_value() ? r->id : -1;
    });
  for (auto& t : ts)
    t.join();
  for (int i = 0; i < n; ++i)
    EXPECT_EQ(ids[i], ids[0]);
  EXPECT_GT(ids[0], 0);
}

}  // namespace
}  // namespace waggle::pgtest
