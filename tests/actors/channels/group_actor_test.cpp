// The group actor's queue and its roster actors, under CAF's test_coordinator:
// - group_queue deals by turns across communities (then senders), a
//   channel's items one at a time in arrival order whoever sent them,
//   bounded per community (plain class);
// - with two sessions, a command of community Y waits behind at most one
//   command per session of community X's 300-command backlog (fake sessions
//   that hold each request until the test answers it);
// - over the queue bound a command is answered `rate-limited`, counted;
// - a roster actor idle past --roster-idle-seconds is stopped (the gauge
//   goes to 0) and the next change recreates it, and its publication lists
//   every member (real group session and PostgreSQL, run on the test
//   coordinator: its SQL blocks inside run(), nothing sleeps).

#include <deque>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <caf/all.hpp>
#include <caf/scheduler/test_coordinator.hpp>
#include <gtest/gtest.h>

#include "actors/channels/group_actor.hpp"
#include "actors/channels/group_queue.hpp"
#include "actors/channels/group_session.hpp"
#include "actors/fanout/hub_actor.hpp"
#include "actors/support/metrics.hpp"
#include "db/group_store.hpp"
#include "messages/register_types.hpp"
#include "tests/support/event_builder.hpp"
#include "tests/support/pg_fixture.hpp"

using namespace waggle;

namespace {

// ---- group_queue ---------------------------------------------------------------

group_queue::item cmd(int64_t community, std::string sender, std::string channel,
                      bool bounded = true) {
  return {community, std::move(sender), std::move(channel), 0, bounded};
}

TEST(GroupQueueTest, AnotherCommunityGoesNextWhateverTheBacklog) {
  group_queue q;
  for (int i = 0; i < 300; ++i) {
    auto it = cmd(1, "kx", "x" + std::to_string(i));
    it.id = static_cast<uint64_t>(i);
    ASSERT_TRUE(q.push(it));
  }
  auto y = cmd(2, "ky", "y");
  y.id = 1000;
  ASSERT_TRUE(q.push(y));
  std::vector<int64_t> order;
  for (int i = 0; i < 4; ++i) {
    auto it = q.next();
    ASSERT_TRUE(it.has_value());
    order.push_back(it->community_id);
  }
  // X went first (it came first), then Y, then X again.
  EXPECT_EQ(order, (std::vector<int64_t>{1, 2, 1, 1}));
}

TEST(GroupQueueTest, SendersOfOneCommunityTakeTurns) {
  group_queue q;
  for (int i = 0; i < 5; ++i)
    q.push(cmd(1, "flooder", "f" + std::to_string(i)));
  q.push(cmd(1, "other", "o"));
  EXPECT_EQ(q.next()->sender, "flooder");
  EXPECT_EQ(q.next()->sender, "other");
  EXPECT_EQ(q.next()->sender, "flooder");
}

TEST(GroupQueueTest, AChannelHasOneItemOutAtATimeInArrivalOrder) {
  group_queue q;
  q.push(cmd(1, "a", "c"));  // 9007 create
  q.push(cmd(1, "a", "c"));  // 9000 put-user, sent right after
  q.push(cmd(1, "b", "c"));  // another sender, same channel
  auto first = q.next();
  ASSERT_TRUE(first.has_value());
  EXPECT_FALSE(q.next().has_value()) << "a second item of the channel went out";
  q.done(1, "c");
  auto second = q.next();
  ASSERT_TRUE(second.has_value());
  EXPECT_FALSE(q.next().has_value());
  q.done(1, "c");
  ASSERT_TRUE(q.next().has_value());
  EXPECT_EQ(q.waiting(), 0u);
}

// Red-team finding (issue 13): sender turns let B's item of x, queued after
// A's, leave first once A had been served (A's head was its y item), so an
// admin's 9000 could run before another key's 9007 that created the group.
TEST(GroupQueueTest, AChannelsItemsLeaveInArrivalOrderWhoeverSentThem) {
  group_queue q;
  auto push = [&](std::string sender, std::string channel, uint64_t id) {
    auto it = cmd(1, std::move(sender), std::move(channel));
    it.id = id;
    ASSERT_TRUE(q.push(it));
  };
  push("a", "y", 1);
  push("a", "x", 2);  // 9007 create x
  push("b", "x", 3);  // 9000 put-user on x, from another key, after it
  push("b", "y", 4);
  std::map<std::string, std::vector<uint64_t>> order;  // per channel
  while (auto it = q.next()) {
    order[it->channel].push_back(it->id);
    q.done(1, it->channel);
  }
  EXPECT_EQ(order["x"], (std::vector<uint64_t>{2, 3})) << "b's 9000 overtook a's 9007";
  EXPECT_EQ(order["y"], (std::vector<uint64_t>{1, 4}));
}

TEST(GroupQueueTest, AnOlderItemOfTheChannelHoldsBackEveryLaterOneOfIt) {
  group_queue q;
  auto put = cmd(1, "admin", "x");
  put.id = 1;
  q.push(put);  // 9000 put-user
  auto remove = cmd(1, "other", "x");
  remove.id = 2;
  q.push(remove);  // 9001 remove, after it
  auto first = q.next();
  ASSERT_TRUE(first.has_value());
  EXPECT_EQ(first->id, 1u);
  EXPECT_FALSE(q.next().has_value()) << "a second item of the channel went out";
  q.done(1, "x");
  auto second = q.next();
  ASSERT_TRUE(second.has_value());
  EXPECT_EQ(second->id, 2u);
}

// The guarantee is per channel, not per sender: a sender's item that waits
// for its channel does not hold back its items of other channels.
TEST(GroupQueueTest, AnItemWaitingForItsChannelDoesNotBlockItsSendersOthers) {
  group_queue q;
  q.push(cmd(1, "c", "x"));
  ASSERT_EQ(q.next()->channel, "x");  // x is out
  q.push(cmd(1, "a", "x"));
  q.push(cmd(1, "a", "y"));
  auto it = q.next();
  ASSERT_TRUE(it.has_value()) << "a's y waited behind its x";
  EXPECT_EQ(it->channel, "y");
  EXPECT_FALSE(q.next().has_value());
  q.done(1, "x");
  it = q.next();
  ASSERT_TRUE(it.has_value());
  EXPECT_EQ(it->sender, "a");
  EXPECT_EQ(it->channel, "x");
  EXPECT_EQ(q.waiting(), 0u);
}

TEST(GroupQueueTest, TheBoundIsPerCommunityAndSparesPublications) {
  group_queue q{3};
  for (int i = 0; i < 3; ++i)
    EXPECT_TRUE(q.push(cmd(1, "k", "c" + std::to_string(i))));
  EXPECT_FALSE(q.push(cmd(1, "k", "c3")));
  EXPECT_TRUE(q.push(cmd(1, "(relay)", "c0", false)));
  EXPECT_TRUE(q.push(cmd(2, "k", "c0")));
  EXPECT_EQ(q.waiting(1), 4u);
  q.next();  // one leaves the queue: room for one more
  EXPECT_TRUE(q.push(cmd(1, "k", "c4")));
}

// ---- the group actor over fake sessions ----------------------------------------

struct held_command {
  group_command_request req;
  caf::typed_response_promise<group_command_reply> promise;
};
using command_log = std::deque<held_command>;

// A session that holds each command until told ("reply": stored, no change)
// and publishes nothing at once.
caf::behavior fake_session(caf::event_based_actor* self, std::shared_ptr<command_log> log) {
  return {
    [](roster_publish_request&) { return roster_publish_reply{}; },
    [self, log](group_command_request& req) {
      auto promise = self->make_response_promise<group_command_reply>();
      log->push_back({req, promise});
      return promise;
    },
    [log](caf::atom_value) {
      auto h = std::move(log->front());
      log->pop_front();
      group_command_reply reply;
      reply.result = {write_outcome::stored, ""};
      h.promise.deliver(std::move(reply));
    },
  };
}

class GroupActorTest : public ::testing::Test {
 protected:
  GroupActorTest() : sys_(config()), sched_(dynamic_cast<caf::scheduler::test_coordinator&>(sys_.scheduler())) {
    env_.sources.unix_now = [] { return int64_t{1'700'000'000}; };
    env_.stats = std::make_shared<waggle::metrics>();
    hub_ = sys_.spawn(hub_actor_impl, env_.for_actor("hub"));
  }
  ~GroupActorTest() override {
    for (auto& a : actors_)
      caf::anon_send_exit(a, caf::exit_reason::user_shutdown);
    sched_.run();
  }

  static caf::actor_system_config& config() {
    static caf::actor_system_config cfg = [] {
      caf::actor_system_config c;
      register_types(c);
      c.set("scheduler.policy", caf::atom("testing"));
      c.set("logger.verbosity", caf::atom("quiet"));
      return c;
    }();
    return cfg;
  }

  group_actor spawn_group(std::vector<group_session_actor> sessions, group_settings s) {
    auto g = sys_.spawn(group_actor_impl, std::move(sessions), hub_, env_.for_actor("group"),
                        std::move(s));
    actors_.push_back(caf::actor_cast<caf::actor>(g));
    return g;
  }

  // An actor that asks the group and keeps the answers.
  caf::actor client(group_actor group, std::shared_ptr<std::vector<ingest_reply>> replies) {
    auto c = sys_.spawn([group, replies](caf::event_based_actor* self) -> caf::behavior {
      return {[self, group, replies](group_request& r) {
        self->request(group, caf::infinite, r).then([replies](ingest_reply& rep) {
          replies->push_back(rep);
        });
      }};
    });
    actors_.push_back(c);
    return c;
  }

  static event_ptr create(const std::string& sk, const std::string& channel) {
    return std::make_shared<const proto::event>(
      test::event_builder{sk}.kind(9007).at(1'700'000'000).tags({{"h", channel}}).sign());
  }

  caf::actor_system sys_;
  caf::scheduler::test_coordinator& sched_;
  node_env env_;
  hub_actor hub_;
  std::vector<caf::actor> actors_;
};

TEST_F(GroupActorTest, AnotherCommunitysCommandWaitsForAtMostOneCommandPerSession) {
  auto log_a = std::make_shared<command_log>(), log_b = std::make_shared<command_log>();
  auto a = sys_.spawn(fake_session, log_a), b = sys_.spawn(fake_session, log_b);
  actors_.push_back(a);
  actors_.push_back(b);
  auto group = spawn_group({caf::actor_cast<group_session_actor>(a),
                            caf::actor_cast<group_session_actor>(b)},
                           group_settings{});
  const std::string x_sk = test::secret(1), y_sk = test::secret(2);
  for (int i = 0; i < 300; ++i)
    caf::anon_send(group, group_request{1, create(x_sk, "x" + std::to_string(i))});
  caf::anon_send(group, group_request{2, create(y_sk, "y")});
  sched_.run();
  // Both sessions busy with X; the rest (Y's included) waits in the group actor.
  ASSERT_EQ(log_a->size(), 1u);
  ASSERT_EQ(log_b->size(), 1u);
  EXPECT_EQ(log_a->front().req.community_id, 1);
  EXPECT_EQ(log_b->front().req.community_id, 1);
  // The first session to finish takes Y's command next.
  caf::anon_send(a, caf::atom("reply"));
  sched_.run();
  ASSERT_EQ(log_a->size(), 1u);
  EXPECT_EQ(log_a->front().req.community_id, 2) << "Y waited behind X's backlog";
  // And X's backlog carries on on both.
  caf::anon_send(b, caf::atom("reply"));
  caf::anon_send(a, caf::atom("reply"));
  sched_.run();
  EXPECT_EQ(log_a->front().req.community_id, 1);
  EXPECT_EQ(log_b->front().req.community_id, 1);
}

TEST_F(GroupActorTest, OverTheQueueBoundACommandIsRateLimitedAndCounted) {
  auto log = std::make_shared<command_log>();
  auto s = sys_.spawn(fake_session, log);
  actors_.push_back(s);
  group_settings settings;
  settings.max_queue_per_community = 3;
  auto group = spawn_group({caf::actor_cast<group_session_actor>(s)}, settings);
  auto replies = std::make_shared<std::vector<ingest_reply>>();
  auto c = client(group, replies);
  const std::string x_sk = test::secret(1);
  // One goes out to the session, three wait, the fifth and sixth are refused.
  for (int i = 0; i < 6; ++i)
    caf::anon_send(c, group_request{1, create(x_sk, "x" + std::to_string(i))});
  caf::anon_send(c, group_request{2, create(x_sk, "other-community")});
  sched_.run();
  ASSERT_EQ(replies->size(), 2u);
  for (auto& r : *replies) {
    EXPECT_EQ(r.outcome, write_outcome::rate_limited);
    EXPECT_EQ(answer_for(r.outcome, r.reason).message.rfind("rate-limited: ", 0), 0u);
  }
  EXPECT_NE(env_.stats->render().find("waggle_refusals_total{reason=\"group_queue_full\"} 2"),
            std::string::npos);
  // The rest is served, the other community's command included.
  for (int i = 0; i < 5; ++i) {
    ASSERT_EQ(log->size(), 1u);
    caf::anon_send(s, caf::atom("reply"));
    sched_.run();
  }
  ASSERT_EQ(replies->size(), 7u);
  for (size_t i = 2; i < replies->size(); ++i)
    EXPECT_EQ((*replies)[i].outcome, write_outcome::stored);
}

// ---- roster actors: stopped when idle, recreated on demand ----------------------

std::string live_roster(pqxx::connection& conn, int64_t community, const std::string& channel) {
  pqxx::nontransaction tx(conn);
  auto r = tx.exec_params(
    "SELECT raw::text FROM events WHERE community_id = $1 AND kind = 39002 AND d_tag = $2 "
    "AND deleted_at IS NULL",
    community, channel);
  return r.empty() ? std::string{} : r[0][0].as<std::string>();
}

TEST_F(GroupActorTest, AnIdleRosterActorIsStoppedAndTheNextChangeRecreatesIt) {
  auto& shared = pgtest::shared_db::get();
  ASSERT_TRUE(shared.error.empty()) << shared.error;
  auto direct = shared.db->connect();
  auto cr = db::add_community(*direct, "roster-idle.test", "", community_policy::open);
  ASSERT_TRUE(cr.has_value());
  const int64_t c = cr->id;
  env_.sources.unix_now = [] { return pgtest::wall_now(); };
  db::relay_signer signer{pgtest::secret(900), proto::pubkey_of(pgtest::secret(900))};
  // Not detached: the session runs on the test coordinator, its SQL inside run().
  auto session = sys_.spawn(group_session_actor_impl, shared.db->url(), signer, env_,
                            std::string{"group_session"});
  actors_.push_back(caf::actor_cast<caf::actor>(session));
  group_settings settings;
  settings.roster_idle = std::chrono::seconds(60);
  auto group = spawn_group({session}, settings);
  const std::string owner = pgtest::secret(1);
  const std::string a = proto::pubkey_of(pgtest::secret(2)), b = proto::pubkey_of(pgtest::secret(3));
  auto command = [&](int32_t kind, std::vector<proto::tag> tags) {
    auto ev = std::make_shared<const proto::event>(
      test::event_builder{owner}.kind(kind).at(pgtest::wall_now()).tags(std::move(tags)).sign());
    caf::anon_send(group, group_request{c, ev});
    sched_.run();
  };
  command(9007, {{"h", "idle"}});
  command(9000, {{"h", "idle"}, {"p", a, "member"}});
  EXPECT_EQ(env_.stats->roster_actors.load(), 1);
  EXPECT_NE(live_roster(*direct, c, "idle").find(a), std::string::npos);

  // A minute without a change: the roster actor goes.
  sched_.trigger_timeouts();
  sched_.run();
  EXPECT_EQ(env_.stats->roster_actors.load(), 0) << "the idle roster actor was not stopped";

  // The next change brings a new one, whose publication captures the whole
  // membership from the database.
  command(9000, {{"h", "idle"}, {"p", b, "member"}});
  EXPECT_EQ(env_.stats->roster_actors.load(), 1);
  auto roster = live_roster(*direct, c, "idle");
  EXPECT_NE(roster.find(a), std::string::npos) << roster;
  EXPECT_NE(roster.find(b), std::string::npos) << roster;
  EXPECT_NE(roster.find(proto::pubkey_of(owner)), std::string::npos) << roster;
}

// A change that reaches the roster actor after it reported idle keeps it:
// the group actor counts what it sent, and a stale report is ignored.
TEST_F(GroupActorTest, AnIdleReportOvertakenByAChangeDoesNotStopTheRoster) {
  auto log = std::make_shared<command_log>();
  auto s = sys_.spawn(fake_session, log);
  actors_.push_back(s);
  auto group = spawn_group({caf::actor_cast<group_session_actor>(s)}, group_settings{});
  // The group actor has sent no change to a roster it does not know: nothing happens.
  caf::anon_send(group, roster_idle{1, "nobody", 0});
  sched_.run();
  EXPECT_EQ(env_.stats->roster_actors.load(), 0);
  caf::anon_send(group, channels_archived{{channel_ref{1, "g"}}});  // spawns roster:1:g
  sched_.run();
  EXPECT_EQ(env_.stats->roster_actors.load(), 1);
  // A report naming fewer changes than were sent is stale.
  caf::anon_send(group, roster_idle{1, "g", 0});
  sched_.run();
  EXPECT_EQ(env_.stats->roster_actors.load(), 1);
}

}  // namespace
