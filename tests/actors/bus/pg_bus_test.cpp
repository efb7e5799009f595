// The PostgreSQL bus driver's own guarantees (docs/bus.md, "PostgreSQL"),
// beyond the conformance suite: gap-free reading when ids commit out of
// order, the doorbell's coalescing and trailing edge, LISTEN bookkeeping
// under churn, exact matching under hash collisions, and garbage collection
// by index at a million rows.

#include <gtest/gtest.h>

#include <atomic>
#include <random>
#include <set>
#include <thread>

#include <pqxx/pqxx>

#include "db/bus_store.hpp"
#include "tests/actors/bus/bus_harness.hpp"

namespace waggle::testing {
namespace {

struct pg_bus : ::testing::Test {
  std::unique_ptr<bus_harness> h;

  void start(std::function<void(size_t, pg_bus_settings&)> tweak = {}) {
    h = make_pg_bus_harness(std::move(tweak));
  }
  void TearDown() override { h.reset(); }

  std::shared_ptr<bus_inbox> subscribe(size_t node, const std::string& subject,
                                       const std::string& group = "") {
    auto inbox = std::make_shared<bus_inbox>();
    auto sub = spawn_bus_subscriber(h->system(node), inbox);
    auto r = bus_subscribe_to(h->system(node), h->bus(node), bus_subscribe{subject, group, sub});
    EXPECT_TRUE(r) << to_string(r.error());
    return inbox;
  }

  // A row as a publisher would store it, in a transaction the test holds.
  static int64_t insert_row(pqxx::work& tx, const std::string& subject, const std::string& payload,
                            std::optional<std::string> hash_of = std::nullopt) {
    const auto& keyed = hash_of ? *hash_of : subject;
    return tx
      .exec_params("INSERT INTO bus_messages (shard, subject_hash, subject, payload)"
                   " VALUES ($1, $2, $3, $4::bytea) RETURNING id",
                   static_cast<int>(bus_shard_of(keyed)),
                   static_cast<int64_t>(bus_subject_hash(keyed)), subject, payload)
      .at(0)
      .at(0)
      .as<int64_t>();
  }
};

// Interleaving: A takes the lower id and holds its transaction; B takes a
// higher id and commits; the readers read B; A commits 2 s later. The
// driver reads A's row then (its xid committed after the reader's
// snapshot). A reader with an id cursor (the reference design) has moved
// past A's id and never returns it: shown on the same rows.
TEST_F(pg_bus, ALowerIdThatCommitsTwoSecondsLaterIsStillDelivered) {
  start();
  auto inbox = subscribe(1, "ooo");
  pqxx::connection a(h->database_url());
  pqxx::work held(a);
  const auto low = insert_row(held, "ooo", "late");

  ASSERT_TRUE(bus_publish_to(h->system(0), h->bus(0), bus_publish{"ooo", "early", ""}));
  auto first = inbox->next();
  ASSERT_TRUE(first);
  EXPECT_EQ(first->payload, "early");

  pqxx::connection observer(h->database_url());
  int64_t cursor = 0;
  {
    pqxx::nontransaction q(observer);
    cursor = q.exec("SELECT max(id) FROM bus_messages WHERE subject = 'ooo'")[0][0].as<int64_t>();
  }
  ASSERT_GT(cursor, low) << "the held row took the lower id";

  std::this_thread::sleep_for(std::chrono::seconds{2});
  held.commit();

  auto second = inbox->next();
  ASSERT_TRUE(second) << "the row that committed late was never delivered";
  EXPECT_EQ(second->payload, "late");

  pqxx::nontransaction q(observer);
  EXPECT_EQ(q.exec_params("SELECT count(*) FROM bus_messages WHERE subject = 'ooo' AND id > $1",
                          cursor)[0][0].as<int>(),
            0)
    << "an id cursor at the last id read would have returned the late row";
}

// 10,000 messages from node 0 on one subject (one shard). Node 1 polls only
// every minute here, so it receives the burst's tail only if a NOTIFY
// follows the last commit: the trailing edge. Node 0's rings, counted by a
// LISTEN of our own, are at most one per 5 ms window.
TEST_F(pg_bus, ABurstRingsAtMostOncePerWindowAndTheTrailingRingFires) {
  start([](size_t node, pg_bus_settings& s) {
    if (node == 1)
      s.poll = std::chrono::minutes{1};
  });
  const std::string subject = "burst";
  pqxx::connection counter(h->database_url());
  std::atomic<int> rings{0};
  struct receiver : pqxx::notification_receiver {
    std::atomic<int>& n;
    receiver(pqxx::connection& c, const std::string& ch, std::atomic<int>& rings)
      : pqxx::notification_receiver(c, ch), n(rings) {}
    void operator()(const std::string&, int) override { ++n; }
  } r(counter, db::bus::shard_channel(static_cast<int>(bus_shard_of(subject))), rings);

  auto inbox = subscribe(1, subject);
  const int n = 10000;
  auto started = std::chrono::steady_clock::now();
  {
    caf::scoped_actor self{h->system(0)};
    for (int i = 0; i < n; ++i)
      self->send(h->bus(0), bus_publish{subject, std::to_string(i), ""});
  }
  for (int i = 0; i < n; ++i) {
    auto m = inbox->next(std::chrono::seconds{20});
    ASSERT_TRUE(m) << "message " << i << " of the burst never reached node 1";
    ASSERT_EQ(m->payload, std::to_string(i));
  }
  auto took = std::chrono::steady_clock::now() - started;
  // Rings still in flight arrive within a moment; count them all.
  for (int i = 0; i < 20; ++i)
    counter.await_notification(0, 50000);
  auto bound = std::chrono::duration_cast<std::chrono::milliseconds>(took).count() / 5 + 1;
  std::printf("[ observed ] %d messages in %lld ms, %d NOTIFYs on the shard (bound %lld)\n", n,
              static_cast<long long>(
                std::chrono::duration_cast<std::chrono::milliseconds>(took).count()),
              rings.load(), static_cast<long long>(bound));
  EXPECT_GE(rings.load(), 1);
  EXPECT_LE(rings.load(), bound);
}

// Eight actors subscribe and unsubscribe at random over 40 subjects at once;
// when they stop, the listener's connection LISTENs on exactly the shards
// of the subjects still subscribed.
TEST_F(pg_bus, AfterChurnTheListenedChannelsAreTheShardsWithSubscribers) {
  start();
  auto& sys = h->system(0);
  auto bus = h->bus(0);
  std::mutex mtx;
  std::map<uint64_t, std::string> live;  // subscription id -> subject
  std::vector<std::thread> churners;
  for (int t = 0; t < 8; ++t)
    churners.emplace_back([&, t] {
      std::mt19937 rng(t);
      caf::scoped_actor self{sys};
      auto inbox = std::make_shared<bus_inbox>();
      auto sub = spawn_bus_subscriber(sys, inbox);
      std::vector<std::pair<uint64_t, std::string>> mine;
      for (int i = 0; i < 60; ++i) {
        if (!mine.empty() && rng() % 2 == 0) {
          auto k = rng() % mine.size();
          self->send(bus, bus_unsubscribe{mine[k].first});
          std::lock_guard guard{mtx};
          live.erase(mine[k].first);
          mine.erase(mine.begin() + static_cast<long>(k));
        } else {
          auto subject = "churn." + std::to_string(rng() % 40);
          auto r = bus_subscribe_to(sys, bus, bus_subscribe{subject, "", sub});
          ASSERT_TRUE(r) << to_string(r.error());
          mine.emplace_back(r->id, subject);
          std::lock_guard guard{mtx};
          live[r->id] = subject;
        }
      }
    });
  for (auto& t : churners)
    t.join();
  std::set<int32_t> expected;
  for (const auto& [id, subject] : live)
    expected.insert(static_cast<int32_t>(bus_shard_of(subject)));
  ASSERT_FALSE(expected.empty());

  std::vector<int32_t> seen;
  caf::scoped_actor self{sys};
  for (int i = 0; i < 200; ++i) {
    self->request(pg_bus_actor{caf::actor_cast<pg_bus_actor>(bus)}, caf::infinite,
                  bus_listening{})
      .receive([&](bus_shards& s) { seen = s.shards; }, [&](caf::error&) { seen.clear(); });
    if (std::set<int32_t>(seen.begin(), seen.end()) == expected)
      break;
    std::this_thread::sleep_for(std::chrono::milliseconds{50});
  }
  EXPECT_EQ(std::set<int32_t>(seen.begin(), seen.end()), expected)
    << "pg_listening_channels() of the listener does not match the subscribed shards";
}

// A request that expires before the fetcher confirmed its inbox is read
// must end that read exactly once, when the confirmation comes: ended twice,
// the inbox's count went below zero and its shard stayed read and listened
// to for good.
TEST_F(pg_bus, RequestsThatExpireBeforeTheirInboxIsReadLeaveNoShardBehind) {
  start();
  auto& sys = h->system(0);
  auto bus = h->bus(0);
  for (int i = 0; i < 300; ++i)
    (void) bus_request_of(sys, bus, bus_request{"nobody.home", "x", static_cast<uint32_t>(i % 3)});
  std::vector<int32_t> seen{-1};
  caf::scoped_actor self{sys};
  for (int i = 0; i < 100 && !seen.empty(); ++i) {
    self->request(caf::actor_cast<pg_bus_actor>(bus), caf::infinite, bus_listening{})
      .receive([&](bus_shards& s) { seen = s.shards; }, [&](caf::error&) {});
    if (!seen.empty())
      std::this_thread::sleep_for(std::chrono::milliseconds{50});
  }
  EXPECT_TRUE(seen.empty()) << "shards still read after every request ended: " << seen.size();
}

// Subject and group text are compared exactly: rows and registrations made
// to collide on hash and shard with another subject never cross over.
TEST_F(pg_bus, ForcedHashCollisionsDeliverNothingAcrossSubjectsOrGroups) {
  start();
  auto plain = subscribe(1, "real");
  auto member = subscribe(1, "real", "workers");
  {
    pqxx::connection c(h->database_url());
    // Node 0 registers itself when its fetcher first connects, and a
    // registration replaces the node's subscriptions: wait for it first.
    for (int i = 0; i < 200; ++i) {
      pqxx::nontransaction q(c);
      if (q.exec("SELECT 1 FROM bus_nodes WHERE node_id = 'test-node-0'").size() == 1)
        break;
      std::this_thread::sleep_for(std::chrono::milliseconds{20});
    }
    pqxx::work tx(c);
    insert_row(tx, "impostor", "crossed", std::string{"real"});  // real's hash and shard
    // A responder registered under real's hash for another subject.
    tx.exec_params(
      "INSERT INTO bus_subscriptions (node_id, subject, grp, subject_hash)"
      " VALUES ('test-node-0', 'impostor.svc', '', $1)",
      static_cast<int64_t>(bus_subject_hash("real.svc")));
    tx.commit();
  }
  ASSERT_TRUE(bus_publish_to(h->system(0), h->bus(0), bus_publish{"real", "genuine", ""}));
  EXPECT_EQ(plain->next()->payload, "genuine") << "the colliding row was delivered first";
  EXPECT_EQ(member->next()->payload, "genuine") << "the group member got the colliding row";

  auto r = bus_request_of(h->system(0), h->bus(0), bus_request{"real.svc", "ping", 600000});
  ASSERT_FALSE(r);
  EXPECT_EQ(static_cast<bus_errc>(r.error().code()), bus_errc::no_responders)
    << "a subscription of another subject with the same hash answered for it";
}

// Garbage collection finds old rows by the published_at index: EXPLAIN of
// its statement on a million rows, then one pass deletes one batch.
TEST_F(pg_bus, GarbageCollectionUsesItsIndexAtAMillionRows) {
  // The nodes' keepers collect garbage too: not during this test.
  start([](size_t, pg_bus_settings& s) { s.maintenance = std::chrono::hours{1}; });
  pqxx::connection c(h->database_url());
  {
    pqxx::work tx(c);
    tx.exec(
      "INSERT INTO bus_messages (shard, subject_hash, subject, payload, published_at)"
      " SELECT g % 32, g, 'gc.' || (g % 100), '\\x00'::bytea,"
      "        now() - interval '1 hour' + g * interval '1 millisecond'"
      "   FROM generate_series(1, 1000000) AS g");
    tx.commit();
  }
  {
    pqxx::nontransaction q(c);
    q.exec("ANALYZE bus_messages");
    std::string plan;
    q.exec(std::string{"PREPARE gc(float8, int) AS "} + db::bus::gc_sql);
    for (const auto& row : q.exec("EXPLAIN EXECUTE gc(30, 10000)"))
      plan += std::string(row[0].c_str()) + "\n";
    std::printf("%s", plan.c_str());
    EXPECT_NE(plan.find("bus_messages_published"), std::string::npos) << plan;
    EXPECT_EQ(plan.find("Seq Scan on bus_messages"), std::string::npos) << plan;
  }
  EXPECT_EQ(db::bus::collect_garbage(c, std::chrono::seconds{30}, 10000), 10000);
  pqxx::nontransaction q(c);
  EXPECT_EQ(q.exec("SELECT count(*) FROM bus_messages")[0][0].as<int64_t>(), 990000);
}

// A node whose PostgreSQL is down at start: every publish, subscribe and
// request is answered `unavailable` at once, nothing crashes, and the bus
// works as soon as the database answers (here: the other node's).
TEST_F(pg_bus, APostgresDownAtStartIsAClearErrorAndTheNodeKeepsServing) {
  start([](size_t node, pg_bus_settings& s) {
    if (node == 0)
      s.database_url = "postgresql://waggle@127.0.0.1:1/nowhere?connect_timeout=2";
  });
  auto& sys = h->system(0);
  auto p = bus_publish_to(sys, h->bus(0), bus_publish{"down", "x", ""});
  ASSERT_FALSE(p);
  EXPECT_EQ(static_cast<bus_errc>(p.error().code()), bus_errc::unavailable) << to_string(p.error());
  auto sub = spawn_bus_subscriber(sys, std::make_shared<bus_inbox>());
  auto s = bus_subscribe_to(sys, h->bus(0), bus_subscribe{"down", "", sub});
  ASSERT_FALSE(s);
  EXPECT_EQ(static_cast<bus_errc>(s.error().code()), bus_errc::unavailable);
  auto r = bus_request_of(sys, h->bus(0), bus_request{"down", "x", 60000});
  ASSERT_FALSE(r);
  EXPECT_EQ(static_cast<bus_errc>(r.error().code()), bus_errc::unavailable);
  // Bad input is still refused as such, and the healthy node serves.
  auto bad = bus_publish_to(sys, h->bus(0), bus_publish{"", "x", ""});
  ASSERT_FALSE(bad);
  EXPECT_EQ(static_cast<bus_errc>(bad.error().code()), bus_errc::bad_subject);
  auto inbox = subscribe(1, "up");
  ASSERT_TRUE(bus_publish_to(h->system(1), h->bus(1), bus_publish{"up", "fine", ""}));
  EXPECT_EQ(inbox->next()->payload, "fine");
}

}  // namespace
}  // namespace waggle::testing
