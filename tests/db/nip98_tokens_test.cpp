// NIP-98 tokens used by NIP-86 calls, across the cluster (db/nip98_tokens.hpp,
// migration 0017, docs/management.md "Replays").

#include <pqxx/nontransaction>
#include <pqxx/transaction>

#include "db/nip98_tokens.hpp"
#include "tests/support/pg_fixture.hpp"

namespace waggle::pgtest {
namespace {

class Nip98TokensTest : public PgTest {};

// The test database is shared by the tests of this process: each its own tokens.
std::string token(char c) { return std::string(128, c); }

TEST_F(Nip98TokensTest, ATokenIsUsedOnceAndARolledBackUseLeavesItUnused) {
  auto now = wall_now();
  {
    pqxx::work tx(conn());
    EXPECT_TRUE(db::use_nip98_token(tx, token('a'), now + 60));
    // rolled back: as a call that failed
  }
  {
    pqxx::work tx(conn());
    EXPECT_TRUE(db::use_nip98_token(tx, token('a'), now + 60)) << "a rolled-back use is no use";
    tx.commit();
  }
  pqxx::work tx(conn());
  EXPECT_FALSE(db::use_nip98_token(tx, token('a'), now + 60));
}

// Red team of issue 34: the purge of expired rows locked them until the call
// committed, so every other NIP-86 call, of any community, waited for the
// slowest one in flight (504 past its lock_timeout). Rows another call is
// purging are now skipped.
TEST_F(Nip98TokensTest, ACallPurgingExpiredRowsDoesNotHoldUpAnother) {
  {
    pqxx::nontransaction tx(conn());
    tx.exec_params("INSERT INTO nip98_tokens_used (token, expires_at) "
                   "VALUES (decode($1, 'hex'), now() - interval '1 hour')",
                   token('c'));
  }
  auto slow = connect();
  pqxx::work open_call(*slow);
  ASSERT_TRUE(db::use_nip98_token(open_call, token('b'), wall_now() + 60));  // purges token('c'), stays open
  pqxx::work other(conn());
  other.exec("SET LOCAL lock_timeout = 2000");
  bool used = false;
  EXPECT_NO_THROW(used = db::use_nip98_token(other, token('d'), wall_now() + 60))
    << "the second call waited for the first one's purge";
  EXPECT_TRUE(used);
  other.commit();
  open_call.commit();
  pqxx::nontransaction check(conn());
  EXPECT_EQ(check.exec_params("SELECT count(*) FROM nip98_tokens_used WHERE token = decode($1, 'hex')",
                              token('c'))[0][0].as<int>(), 0);
}

// Each node judges a token's freshness by its own clock, the purge by the
// database's: the row outlives the token by the skew margin.
TEST_F(Nip98TokensTest, ARowOutlivesItsTokenByTheSkewMargin) {
  auto ends = wall_now() - 10;  // the token stopped passing 10 s ago by this clock
  {
    pqxx::work tx(conn());
    ASSERT_TRUE(db::use_nip98_token(tx, token('e'), ends));
    tx.commit();
  }
  {
    pqxx::work tx(conn());  // another call: its purge takes what has expired
    ASSERT_TRUE(db::use_nip98_token(tx, token('f'), wall_now() + 60));
    tx.commit();
  }
  pqxx::work tx(conn());
  EXPECT_FALSE(db::use_nip98_token(tx, token('e'), ends))
    << "a node whose clock lags by 10 s would have accepted the replay";
}

}  // namespace
}  // namespace waggle::pgtest
