// The connection actor's channel rules (NIP-29), step by step under
// test_coordinator: a REQ naming channels is access-checked before it is
// registered, re-checked by the history query, and ended by a revocation;
// group commands go to the group actor; group state is the relay's alone.

#include "actors/connection/connection_actor.hpp"
#include "actors/fanout/hub_actor.hpp"
#include "messages/proto/client_message.hpp"
#include "tests/actors/actor_fixture.hpp"
#include "tests/support/event_builder.hpp"

using namespace waggle;
using namespace waggle::testing;

namespace {

constexpr int64_t now = 1'700'000'000;
const std::string alice_sk(64, '1');
const std::string bob_sk(64, '2');
const std::string relay_sk(64, '9');

proto::event make_event(const std::string& sk, int32_t kind, std::vector<proto::tag> tags = {},
                        std::string content = "") {
  return test::event_builder{sk}.kind(kind).tags(std::move(tags)).content(std::move(content))
    .at(now).sign();
}

std::string frame(std::string_view verb, const std::string& json) {
  return "[\"" + std::string{verb} + "\"," + json + "]";
}

class connection_channels_test : public actor_test {
 protected:
  connection_channels_test() {
    ingest_raw = spawn(fake_ingest, ingest_log);
    reader_raw = spawn(fake_reader, reader_log);
    group_raw = spawn(fake_group, group_log);
    hub = spawn(hub_actor_impl, test_env());
    run();
  }
  ~connection_channels_test() override {
    ingest_log->held_requests.clear();
    reader_log->held_requests.clear();
    reader_log->access_requests.clear();
    group_log->held_requests.clear();
  }

  // A connection on which alice authenticated; its sink's frames are cleared.
  connection_actor open_alice() {
    connection_settings settings;
    settings.community_id = 1;
    settings.host = "chat.example";
    settings.relay_pubkey = proto::pubkey_of(relay_sk);
    sink = std::make_shared<recording_sink>();
    auto conn = spawn(connection_actor_impl, settings,
                      connection_peers{caf::actor_cast<ingest_actor>(ingest_raw), hub,
                                       caf::actor_cast<reader_pool_actor>(reader_raw),
                                       caf::actor_cast<group_actor>(group_raw), {}, {}},
                      test_env(now), sink);
    run();
    auto auth = make_event(alice_sk, 22242,
                           {{"relay", "ws://chat.example/"}, {"challenge", "challenge-1"}});
    send(conn, frame("AUTH", auth.raw));
    sink->take();
    return conn;
  }
  void send(const connection_actor& conn, std::string text) {
    caf::anon_send(conn, socket_frame{std::move(text)});
    run();
  }
  void answer_access(access_reply reply) {
    caf::anon_send(reader_raw, caf::atom("access"), std::move(reply));
    run();
  }
  void answer_history(std::vector<std::string> raws) {
    caf::anon_send(reader_raw, caf::atom("reply"), std::move(raws));
    run();
  }
  // The real reader answers a REQ naming channels with its re-check's grants.
  void answer_history(std::vector<std::string> raws, std::vector<channel_grant> grants) {
    caf::anon_send(reader_raw, caf::atom("reply"), std::move(raws), std::move(grants));
    run();
  }
  // An event committed in channel `ch`, straight into the real hub.
  proto::event commit_post(const std::string& ch, const std::string& text) {
    auto ev = make_event(bob_sk, 9, {{"h", ch}}, text);
    caf::anon_send(hub, committed_events{{ingest_item{
                          1, std::make_shared<const proto::event>(ev)}}});
    run();
    return ev;
  }
  void revoke(channel_revoked msg) {
    caf::anon_send(hub, std::move(msg));
    run();
  }
  // Opens sub "s" on channel "ops", granted as `grant`, through EOSE.
  connection_actor subscribed(channel_grant grant) {
    auto conn = open_alice();
    send(conn, R"(["REQ","s",{"#h":["ops"]}])");
    answer_access({{std::move(grant)}, {}, {}});
    EXPECT_EQ(reader_log->held_requests.size(), 1u);
    answer_history({});
    EXPECT_EQ(sink->take(), std::vector<std::string>{proto::render_eose("s")});
    return conn;
  }

  std::shared_ptr<fake_ingest_log> ingest_log = std::make_shared<fake_ingest_log>();
  std::shared_ptr<fake_reader_log> reader_log = std::make_shared<fake_reader_log>();
  std::shared_ptr<fake_group_log> group_log = std::make_shared<fake_group_log>();
  caf::actor ingest_raw, reader_raw, group_raw;
  hub_actor hub;
  std::shared_ptr<recording_sink> sink;
  const std::string alice = proto::pubkey_of(alice_sk);
};

TEST_F(connection_channels_test, a_refused_req_is_closed_before_it_is_ever_registered) {
  auto conn = open_alice();
  send(conn, R"(["REQ","s",{"kinds":[9],"#h":["ops","lobby"]}])");
  ASSERT_EQ(reader_log->access_requests.size(), 1u);
  const auto& asked = reader_log->access_requests.front().req.access;
  EXPECT_EQ(asked.channels, (std::vector<std::string>{"lobby", "ops"}));
  EXPECT_EQ(asked.pubkeys, std::vector<std::string>{alice});
  // Not registered yet: a post in the channel reaches nobody.
  commit_post("ops", "too early");
  EXPECT_TRUE(sink->take().empty());
  access_reply refused;
  refused.err = {ec::restricted, "not a member of this private channel (ops)"};
  answer_access(refused);
  EXPECT_EQ(sink->take(), std::vector<std::string>{proto::render_closed(
                            "s", "restricted: not a member of this private channel (ops)")});
  EXPECT_TRUE(reader_log->held_requests.empty());  // no history query
  commit_post("ops", "after refusal");
  EXPECT_TRUE(sink->take().empty());
}

TEST_F(connection_channels_test, the_history_query_rechecks_access_after_registration) {
  auto conn = open_alice();
  send(conn, R"(["REQ","s",{"#h":["ops"]}])");
  answer_access({{{"ops", false, {alice}}}, {}, {}});
  ASSERT_EQ(reader_log->held_requests.size(), 1u);
  const auto& h = reader_log->held_requests.front().req;
  EXPECT_EQ(h.access.channels, std::vector<std::string>{"ops"});
  EXPECT_EQ(h.access.pubkeys, std::vector<std::string>{alice});
}

TEST_F(connection_channels_test, removal_from_a_private_channel_ends_the_subscription_at_once) {
  auto conn = subscribed({"ops", false, {alice}});
  auto before = commit_post("ops", "before");
  EXPECT_EQ(sink->take(), std::vector<std::string>{proto::render_event("s", before.raw)});
  revoke({1, "ops", alice, false});
  EXPECT_EQ(sink->take(), std::vector<std::string>{proto::render_closed(
                            "s", "restricted: no longer a member of private channel ops")});
  commit_post("ops", "after");
  EXPECT_TRUE(sink->take().empty());
}

TEST_F(connection_channels_test, a_closed_for_a_refused_replacement_ends_the_live_subscription) {
  // CLOSED "s" tells the client "s" ended: a REQ replacing it with a
  // malformed filter must not leave the old one delivering.
  auto conn = subscribed({"ops", false, {alice}});
  send(conn, R"(["REQ","s",{"kinds":"x"}])");
  ASSERT_EQ(sink->take().size(), 1u);
  commit_post("ops", "after the CLOSED");
  EXPECT_TRUE(sink->take().empty());
}

TEST_F(connection_channels_test, a_revocation_while_history_loads_wins_over_the_late_history) {
  auto conn = open_alice();
  send(conn, R"(["REQ","s",{"#h":["ops"]}])");
  answer_access({{{"ops", false, {alice}}}, {}, {}});
  revoke({1, "ops", alice, false});
  EXPECT_EQ(sink->take().size(), 1u);  // CLOSED restricted
  answer_history({make_event(bob_sk, 9, {{"h", "ops"}}, "old").raw});
  EXPECT_TRUE(sink->take().empty());  // neither the event nor EOSE
}

TEST_F(connection_channels_test, open_grants_survive_removal_but_not_the_switch_to_private) {
  auto conn = subscribed({"ops", true, {}});
  revoke({1, "ops", alice, false});
  auto still = commit_post("ops", "still readable");
  EXPECT_EQ(sink->take(), std::vector<std::string>{proto::render_event("s", still.raw)});
  revoke({1, "ops", "", false});  // became private
  EXPECT_EQ(sink->take().size(), 1u);
  commit_post("ops", "private now");
  EXPECT_TRUE(sink->take().empty());
}

TEST_F(connection_channels_test, revocations_of_other_pubkeys_or_channels_change_nothing) {
  auto conn = subscribed({"ops", false, {alice}});
  revoke({1, "ops", proto::pubkey_of(bob_sk), false});
  revoke({1, "lobby", alice, false});
  revoke({2, "ops", alice, true});  // another community
  auto post = commit_post("ops", "kept");
  EXPECT_EQ(sink->take(), std::vector<std::string>{proto::render_event("s", post.raw)});
  revoke({1, "ops", "", true});  // deleted
  EXPECT_EQ(sink->take(), std::vector<std::string>{proto::render_closed(
                            "s", "restricted: channel ops was deleted")});
}

TEST_F(connection_channels_test, group_commands_go_to_the_group_actor_and_ok_follows_its_answer) {
  auto conn = open_alice();
  auto create = make_event(alice_sk, 9007, {{"h", "ops"}});
  send(conn, frame("EVENT", create.raw));
  EXPECT_TRUE(ingest_log->held_requests.empty());
  ASSERT_EQ(group_log->held_requests.size(), 1u);
  EXPECT_TRUE(sink->take().empty());  // no OK before the commit
  caf::anon_send(group_raw, caf::atom("reply"), static_cast<int>(write_outcome::refused),
                 std::string{"group already exists"});
  run();
  EXPECT_EQ(sink->take(), std::vector<std::string>{proto::render_ok(
                            create.id, false, "restricted: group already exists")});
}

TEST_F(connection_channels_test, group_state_is_the_relays_and_an_event_has_one_channel) {
  auto conn = open_alice();
  auto forged = make_event(alice_sk, 39002, {{"d", "ops"}, {"p", alice, "", "owner"}});
  send(conn, frame("EVENT", forged.raw));
  auto two = make_event(alice_sk, 9, {{"h", "ops"}, {"h", "lobby"}});
  send(conn, frame("EVENT", two.raw));
  auto frames = sink->take();
  ASSERT_EQ(frames.size(), 2u);
  EXPECT_NE(frames[0].find(",false,\"restricted: group state"), std::string::npos) << frames[0];
  EXPECT_NE(frames[1].find(",false,\"invalid: an event belongs to at most one channel"),
            std::string::npos) << frames[1];
  EXPECT_TRUE(ingest_log->held_requests.empty());
}

TEST_F(connection_channels_test, typing_in_a_channel_needs_membership) {
  auto conn = open_alice();
  auto typing = make_event(alice_sk, 20002, {{"h", "ops"}});
  send(conn, frame("EVENT", typing.raw));
  ASSERT_EQ(reader_log->access_requests.size(), 1u);
  answer_access({{{"ops", true, {}}}, {}, {}});  // open channel, but alice is no member
  auto frames = sink->take();
  ASSERT_EQ(frames.size(), 1u);
  EXPECT_NE(frames[0].find(",false,\"restricted:"), std::string::npos) << frames[0];
}

// Regressions from the red-team review: a revocation that reaches the hub
// while a REQ's access check is in flight reaches nobody, so the first
// check's grant can be stale; the history re-check's grants narrow it.
// Interleaving (channel "ops" is open, alice is a member):
//  1. alice: REQ s {#h:[ops]}            -> access_request (reader reads: open, alice member)
//  2. owner: 9002 ops private, COMMIT    -> group actor -> hub: channel_revoked(ops, "")
//     The hub knows no subscription of alice's connection yet: the revocation
//     reaches nobody.
//  3. the access reply (read in 1, before 2 committed) arrives: grant {open, [alice]}
//  4. hub_subscribe, hub_ack, history_request: the reader re-checks: ops is
//     private and alice a member -> allowed (the grant is NOT refreshed)
//  5. owner: 9001 remove alice, COMMIT -> hub: channel_revoked(ops, alice) BEFORE the OK.
//     The connection erases alice from grant.members; grant.open is still
//     (wrongly) true -> the subscription stays.
//  6. bob posts in ops after the removal's OK -> delivered to alice. Claim 5 says never.
TEST_F(connection_channels_test, E1_a_revocation_lost_during_the_access_check_is_caught_by_the_recheck) {
  auto conn = open_alice();
  send(conn, R"(["REQ","s",{"#h":["ops"]}])");
  ASSERT_EQ(reader_log->access_requests.size(), 1u);
  revoke({1, "ops", "", false});                 // 2. became private
  answer_access({{{"ops", true, {alice}}}, {}, {}});  // 3. stale, read before step 2 committed
  ASSERT_EQ(reader_log->held_requests.size(), 1u);
  answer_history({}, {{"ops", false, {alice}}});  // 4. re-check: private now, alice a member
  ASSERT_EQ(sink->take(), std::vector<std::string>{proto::render_eose("s")});
  revoke({1, "ops", alice, false});               // 5. alice removed from the private channel
  auto frames_after_removal = sink->take();
  auto leaked = commit_post("ops", "secret, posted after alice's removal was acknowledged");
  auto frames = sink->take();
  EXPECT_EQ(frames_after_removal.size(), 1u)
    << "no CLOSED restricted after alice's removal from the (now private) channel";
  EXPECT_TRUE(frames.empty()) << "alice, removed from private channel ops, received: "
                              << (frames.empty() ? std::string() : frames[0]);
}

// The same loss with two pubkeys on one connection and no channel change
// besides removals: the revocation of bob reaches the connection before the
// access reply (the connection is known to the hub through another
// subscription) and is ignored; the stale grant keeps bob.
TEST_F(connection_channels_test, E1b_two_pubkeys_the_stale_grant_ends_after_both_removals) {
  auto conn = open_alice();
  auto auth_bob = make_event(bob_sk, 22242, {{"relay", "ws://chat.example/"}, {"challenge", "challenge-1"}});
  send(conn, "[\"AUTH\"," + auth_bob.raw + "]");
  sink->take();
  const std::string bob = proto::pubkey_of(bob_sk);
  send(conn, R"(["REQ","other",{"kinds":[1]}])");  // makes the hub know this connection
  answer_history({}, {});
  sink->take();
  send(conn, R"(["REQ","s",{"#h":["ops"]}])");  // ops: private; alice and bob members
  ASSERT_EQ(reader_log->access_requests.size(), 1u);
  revoke({1, "ops", bob, false});                        // bob removed; reaches the connection first
  answer_access({{{"ops", false, {alice, bob}}}, {}, {}});   // read before the removal committed
  answer_history({}, {{"ops", false, {alice}}});        // re-check: only alice is a member
  sink->take();
  revoke({1, "ops", alice, false});  // alice removed too: nobody on this connection is a member
  auto closed = sink->take();
  auto leaked = make_event(relay_sk, 9, {{"h", "ops"}}, "after both removals");
  caf::anon_send(hub, committed_events{{ingest_item{1, std::make_shared<const proto::event>(leaked)}}});
  run();
  auto frames = sink->take();
  EXPECT_EQ(closed.size(), 1u) << "the subscription was not ended after both members were removed";
  EXPECT_TRUE(frames.empty()) << "received after both removals: "
                              << (frames.empty() ? std::string() : frames[0]);
}

}  // namespace
