// The connection actor's state machine (NIP-42 auth, EVENT admission, the
// subscription lifecycle, limits, drain), driven by test_coordinator with
// fake ingest/reader and the real fanout hub.

#include "actors/connection/connection_actor.hpp"
#include "actors/fanout/hub_actor.hpp"
#include "messages/proto/client_message.hpp"
#include "tests/actors/actor_fixture.hpp"
#include "tests/support/event_builder.hpp"

#include <rapidjson/document.h>

using namespace waggle;
using namespace waggle::testing;

namespace {

constexpr int64_t now = 1'700'000'000;
const std::string alice_sk(64, '1');
const std::string bob_sk(64, '2');

proto::event make_event(const std::string& sk, int32_t kind, std::string content,
                        std::vector<proto::tag> tags = {}, int64_t created_at = now) {
  return test::event_builder{sk}.kind(kind).content(std::move(content)).tags(std::move(tags))
    .at(created_at).sign();
}

std::string frame(std::string_view verb, const std::string& json) {
  return "[\"" + std::string{verb} + "\"," + json + "]";
}

std::string auth_frame(const std::string& sk, const std::string& challenge,
                       const std::string& relay = "ws://chat.example:7777/",
                       int64_t created_at = now, int32_t kind = 22242) {
  auto ev = make_event(sk, kind, "", {{"relay", relay}, {"challenge", challenge}}, created_at);
  return frame("AUTH", ev.raw);
}

// Parses a relay frame into its JSON array.
rapidjson::Document parse(const std::string& text) {
  rapidjson::Document d;
  d.Parse(text.c_str(), text.size());
  EXPECT_FALSE(d.HasParseError()) << text;
  return d;
}

std::string verb(const std::string& text) {
  auto d = parse(text);
  return d[0].GetString();
}

class connection_test : public actor_test {
 protected:
  connection_test() {
    ingest_raw = spawn(fake_ingest, ingest_log);
    reader_raw = spawn(fake_reader, reader_log);
    ingest = caf::actor_cast<ingest_actor>(ingest_raw);
    reader = caf::actor_cast<reader_pool_actor>(reader_raw);
    hub = spawn(hub_actor_impl, test_env());
    run();
  }

  connection_actor open(size_t max_subscriptions = 64) {
    connection_settings settings;
    settings.community_id = 1;
    settings.host = "chat.example";
    settings.max_subscriptions = max_subscriptions;
    // The fake reader holds reads until a test answers them: the read bound
    // (read_admission_test tests it) must not cut in first.
    settings.reads.max_in_flight = 1000;
    auto sink = std::make_shared<recording_sink>();
    auto conn = spawn(connection_actor_impl, settings,
                            connection_peers{ingest, hub, reader, {}, {}, {}}, test_env(now), sink);
    sinks.push_back(sink);
    run();
    return conn;
  }

  void send(const connection_actor& conn, std::string text) {
    caf::anon_send(conn, socket_frame{std::move(text)});
    run();
  }

  // Opens a connection and authenticates `sk` on it.
  connection_actor open_authed(const std::string& sk = alice_sk) {
    auto conn = open();
    auto& sink = *sinks.back();
    EXPECT_EQ(sink.take(), std::vector<std::string>{R"(["AUTH","challenge-1"])"});
    send(conn, auth_frame(sk, "challenge-1"));
    auto frames = sink.take();
    EXPECT_EQ(frames.size(), 1u);
    EXPECT_NE(frames[0].find(",true,"), std::string::npos) << frames[0];
    return conn;
  }

  ~connection_test() override {
    ingest_log->held_requests.clear();
    reader_log->held_requests.clear();
  }

  std::shared_ptr<fake_ingest_log> ingest_log = std::make_shared<fake_ingest_log>();
  std::shared_ptr<fake_reader_log> reader_log = std::make_shared<fake_reader_log>();
  // The fakes commit or answer the oldest held request when told to.
  void commit_next(write_outcome outcome, std::string reason = {}) {
    caf::anon_send(ingest_raw, caf::atom("reply"), static_cast<int>(outcome), std::move(reason));
    run();
  }
  void history_next(std::vector<std::string> raws) {
    caf::anon_send(reader_raw, caf::atom("reply"), std::move(raws));
    run();
  }

  caf::actor ingest_raw;
  caf::actor reader_raw;
  ingest_actor ingest;
  reader_pool_actor reader;
  hub_actor hub;
  std::vector<std::shared_ptr<recording_sink>> sinks;
};

TEST_F(connection_test, sends_a_challenge_when_the_socket_opens) {
  open();
  EXPECT_EQ(sinks[0]->take(), std::vector<std::string>{R"(["AUTH","challenge-1"])"});
}

TEST_F(connection_test, refuses_event_req_and_count_before_auth) {
  auto conn = open();
  sinks[0]->take();
  auto ev = make_event(alice_sk, 1, "hi");
  send(conn, frame("EVENT", ev.raw));
  send(conn, R"(["REQ","s1",{"kinds":[1]}])");
  send(conn, R"(["COUNT","c1",{"kinds":[1]}])");
  auto frames = sinks[0]->take();
  ASSERT_EQ(frames.size(), 3u);
  EXPECT_EQ(frames[0], proto::render_ok(ev.id, false,
                                        "auth-required: authenticate with NIP-42 AUTH before publishing"));
  EXPECT_EQ(verb(frames[1]), "CLOSED");
  EXPECT_NE(frames[1].find("auth-required:"), std::string::npos);
  EXPECT_EQ(verb(frames[2]), "CLOSED");
  EXPECT_NE(frames[2].find("auth-required:"), std::string::npos);
  EXPECT_TRUE(ingest_log->held_requests.empty());
  EXPECT_TRUE(reader_log->held_requests.empty());
}

TEST_F(connection_test, rejects_auth_events_that_do_not_prove_this_session) {
  auto conn = open();
  sinks[0]->take();
  struct bad_case {
    const char* what;
    std::string frame;
    const char* expect;
  };
  std::vector<bad_case> cases = {
    {"wrong challenge", auth_frame(alice_sk, "challenge-0"), "challenge does not match"},
    {"other relay", auth_frame(alice_sk, "challenge-1", "wss://evil.example/"), "relay tag"},
    {"stale", auth_frame(alice_sk, "challenge-1", "ws://chat.example", now - 61), "created_at"},
    {"future", auth_frame(alice_sk, "challenge-1", "ws://chat.example", now + 61), "created_at"},
    {"wrong kind", auth_frame(alice_sk, "challenge-1", "ws://chat.example", now, 1), "22242"},
  };
  for (auto& c : cases) {
    send(conn, c.frame);
    auto frames = sinks[0]->take();
    ASSERT_EQ(frames.size(), 1u) << c.what;
    EXPECT_NE(frames[0].find(",false,\"invalid: "), std::string::npos) << c.what << frames[0];
    EXPECT_NE(frames[0].find(c.expect), std::string::npos) << c.what << frames[0];
  }
  // Still unauthenticated.
  auto ev = make_event(alice_sk, 1, "hi");
  send(conn, frame("EVENT", ev.raw));
  EXPECT_NE(sinks[0]->take()[0].find("auth-required:"), std::string::npos);
}

TEST_F(connection_test, a_tampered_auth_signature_is_rejected) {
  auto conn = open();
  sinks[0]->take();
  auto text = auth_frame(alice_sk, "challenge-1");
  // Flip one signature nibble: the id still matches, the signature does not.
  auto pos = text.find("\"sig\":\"") + 7;
  text[pos] = text[pos] == '0' ? '1' : '0';
  send(conn, text);
  auto frames = sinks[0]->take();
  ASSERT_EQ(frames.size(), 1u);
  EXPECT_NE(frames[0].find("invalid: bad signature"), std::string::npos) << frames[0];
}

TEST_F(connection_test, several_pubkeys_may_authenticate_and_others_are_restricted) {
  auto conn = open_authed(alice_sk);
  send(conn, auth_frame(bob_sk, "challenge-1"));
  EXPECT_NE(sinks[0]->take()[0].find(",true,"), std::string::npos);
  auto from_bob = make_event(bob_sk, 1, "bob");
  send(conn, frame("EVENT", from_bob.raw));
  ASSERT_EQ(ingest_log->held_requests.size(), 1u);
  const std::string carol_sk(64, '3');
  auto from_carol = make_event(carol_sk, 1, "carol");
  send(conn, frame("EVENT", from_carol.raw));
  auto frames = sinks[0]->take();
  ASSERT_EQ(frames.size(), 1u);
  EXPECT_EQ(frames[0], proto::render_ok(from_carol.id, false,
                                        "restricted: event pubkey is not authenticated on this connection"));
  EXPECT_EQ(ingest_log->held_requests.size(), 1u);
}

TEST_F(connection_test, ok_is_sent_only_after_ingest_commits) {
  auto conn = open_authed();
  auto ev = make_event(alice_sk, 1, "hello");
  send(conn, frame("EVENT", ev.raw));
  ASSERT_EQ(ingest_log->held_requests.size(), 1u);
  EXPECT_EQ(ingest_log->held_requests[0].req.ev->id, ev.id);
  EXPECT_EQ(ingest_log->held_requests[0].req.community_id, 1);
  EXPECT_TRUE(sinks[0]->take().empty()) << "no OK before the commit";
  commit_next(write_outcome::stored);
  EXPECT_EQ(sinks[0]->take(), std::vector<std::string>{proto::render_ok(ev.id, true, "")});
}

TEST_F(connection_test, outcomes_render_as_nip01_ok_messages) {
  auto conn = open_authed();
  std::vector<std::pair<write_outcome, std::string>> outcomes = {
    {write_outcome::duplicate, R"(,true,"duplicate: already have this event"])"},
    {write_outcome::superseded, R"(,true,"duplicate: a newer version)"},
    {write_outcome::rejected, R"(,false,"invalid: poison")"},
    {write_outcome::failed, R"(,false,"error: database unavailable")"},
  };
  for (auto& [outcome, expected] : outcomes) {
    auto ev = make_event(alice_sk, 1, std::string("x").append(std::to_string(static_cast<int>(outcome))));
    send(conn, frame("EVENT", ev.raw));
    commit_next(outcome, outcome == write_outcome::rejected ? "poison" : "");
    auto frames = sinks[0]->take();
    ASSERT_EQ(frames.size(), 1u);
    EXPECT_NE(frames[0].find(expected), std::string::npos) << frames[0];
  }
}

TEST_F(connection_test, rejects_bad_events_without_touching_ingest) {
  auto conn = open_authed();
  auto auth_kind_event = make_event(alice_sk, 22242, "");
  auto stale = make_event(alice_sk, 1, "old", {}, now - 901);
  auto future = make_event(alice_sk, 1, "new", {}, now + 901);
  auto tampered = make_event(alice_sk, 1, "sig");
  auto pos = tampered.raw.find("\"sig\":\"") + 7;
  tampered.raw[pos] = tampered.raw[pos] == 'a' ? 'b' : 'a';
  for (auto* raw : {&auth_kind_event.raw, &stale.raw, &future.raw, &tampered.raw}) {
    send(conn, frame("EVENT", *raw));
    auto frames = sinks[0]->take();
    ASSERT_EQ(frames.size(), 1u);
    EXPECT_NE(frames[0].find(",false,\"invalid: "), std::string::npos) << frames[0];
  }
  send(conn, R"(["EVENT",{"id":"zz"}])");
  send(conn, "not json");
  send(conn, R"({"not":"an array"})");
  auto frames = sinks[0]->take();
  ASSERT_EQ(frames.size(), 3u);
  for (auto& f : frames)
    EXPECT_NE(f.find("invalid: "), std::string::npos) << f;
  EXPECT_TRUE(ingest_log->held_requests.empty());
}

TEST_F(connection_test, req_sends_history_then_eose_then_live_events) {
  auto conn = open_authed();
  send(conn, R"(["REQ","s1",{"kinds":[1]}])");
  ASSERT_EQ(reader_log->held_requests.size(), 1u) << "history is queried after the hub ack";
  EXPECT_EQ(reader_log->held_requests[0].req.community_id, 1);
  auto old1 = make_event(bob_sk, 1, "old one", {}, now - 10);
  history_next({old1.raw});
  run();
  EXPECT_EQ(sinks[0]->take(), (std::vector<std::string>{proto::render_event("s1", old1.raw),
                                                        proto::render_eose("s1")}));
  // A committed event reaches the live subscription exactly once.
  auto fresh = std::make_shared<const proto::event>(make_event(bob_sk, 1, "fresh"));
  caf::anon_send(hub, committed_events{{ingest_item{1, fresh}}});
  run();
  EXPECT_EQ(sinks[0]->take(), std::vector<std::string>{proto::render_event("s1", fresh->raw)});
  // Another community's event never reaches it; a non-matching kind neither.
  auto other_tenant = std::make_shared<const proto::event>(make_event(bob_sk, 1, "tenant 2"));
  auto other_kind = std::make_shared<const proto::event>(make_event(bob_sk, 7, "+"));
  caf::anon_send(hub, committed_events{{ingest_item{2, other_tenant},
                                        ingest_item{1, other_kind}}});
  run();
  EXPECT_TRUE(sinks[0]->take().empty());
}

TEST_F(connection_test, live_events_before_eose_are_buffered_and_deduplicated) {
  auto conn = open_authed();
  send(conn, R"(["REQ","s1",{"kinds":[1]}])");
  auto in_both = std::make_shared<const proto::event>(make_event(bob_sk, 1, "both"));
  auto only_live = std::make_shared<const proto::event>(make_event(bob_sk, 1, "live"));
  caf::anon_send(hub, committed_events{{ingest_item{1, in_both},
                                        ingest_item{1, only_live}}});
  run();
  EXPECT_TRUE(sinks[0]->take().empty()) << "nothing before the history";
  history_next({in_both->raw});
  run();
  EXPECT_EQ(sinks[0]->take(), (std::vector<std::string>{proto::render_event("s1", in_both->raw),
                                                        proto::render_eose("s1"),
                                                        proto::render_event("s1", only_live->raw)}));
}

TEST_F(connection_test, close_ends_a_subscription_even_while_history_is_loading) {
  auto conn = open_authed();
  send(conn, R"(["REQ","s1",{"kinds":[1]}])");
  send(conn, R"(["CLOSE","s1"])");
  auto ev = make_event(bob_sk, 1, "late");
  history_next({ev.raw});
  auto live = std::make_shared<const proto::event>(make_event(bob_sk, 1, "live"));
  caf::anon_send(hub, committed_events{{ingest_item{1, live}}});
  run();
  EXPECT_TRUE(sinks[0]->take().empty()) << "no frame for a closed subscription";
}

TEST_F(connection_test, req_and_close_are_never_reordered) {
  // REQ s1, CLOSE s1, REQ s1 again: the first generation's history must not
  // leak into the second subscription.
  auto conn = open_authed();
  send(conn, R"(["REQ","s1",{"kinds":[1]}])");
  send(conn, R"(["CLOSE","s1"])");
  send(conn, R"(["REQ","s1",{"kinds":[7]}])");
  ASSERT_EQ(reader_log->held_requests.size(), 2u);
  auto first = make_event(bob_sk, 1, "first generation");
  auto second = make_event(bob_sk, 7, "+");
  history_next({first.raw});
  history_next({second.raw});
  run();
  EXPECT_EQ(sinks[0]->take(), (std::vector<std::string>{proto::render_event("s1", second.raw),
                                                        proto::render_eose("s1")}));
  // And the live index holds only the new filter.
  auto kind1 = std::make_shared<const proto::event>(make_event(bob_sk, 1, "k1"));
  auto kind7 = std::make_shared<const proto::event>(make_event(bob_sk, 7, "k7"));
  caf::anon_send(hub, committed_events{{ingest_item{1, kind1}, ingest_item{1, kind7}}});
  run();
  EXPECT_EQ(sinks[0]->take(), std::vector<std::string>{proto::render_event("s1", kind7->raw)});
}

TEST_F(connection_test, an_event_matching_two_subscriptions_reaches_each_once) {
  auto conn = open_authed();
  send(conn, R"(["REQ","a",{"kinds":[1]},{"authors":[")" + proto::pubkey_of(bob_sk) + R"("]}])");
  send(conn, R"(["REQ","b",{"kinds":[1]}])");
  history_next({});
  history_next({});
  run();
  sinks[0]->take();
  auto ev = std::make_shared<const proto::event>(make_event(bob_sk, 1, "twice?"));
  caf::anon_send(hub, committed_events{{ingest_item{1, ev}}});
  run();
  auto frames = sinks[0]->take();
  std::sort(frames.begin(), frames.end());
  EXPECT_EQ(frames, (std::vector<std::string>{proto::render_event("a", ev->raw),
                                              proto::render_event("b", ev->raw)}));
}

TEST_F(connection_test, subscription_limit_is_enforced_and_replacing_does_not_count) {
  auto conn = open();
  sinks[0]->take();
  send(conn, auth_frame(alice_sk, "challenge-1"));
  sinks[0]->take();
  for (int i = 0; i < 64; ++i)
    send(conn, R"(["REQ","s)" + std::to_string(i) + R"(",{"kinds":[1]}])");
  EXPECT_TRUE(sinks[0]->take().empty());
  send(conn, R"(["REQ","s0",{"kinds":[2]}])");  // replaces, allowed
  EXPECT_TRUE(sinks[0]->take().empty());
  send(conn, R"(["REQ","s64",{"kinds":[1]}])");
  auto frames = sinks[0]->take();
  ASSERT_EQ(frames.size(), 1u);
  EXPECT_EQ(verb(frames[0]), "CLOSED");
  EXPECT_NE(frames[0].find("rate-limited: too many subscriptions"), std::string::npos);
}

TEST_F(connection_test, malformed_filters_get_closed_with_invalid) {
  auto conn = open_authed();
  send(conn, R"(["REQ","s1",{"kinds":"1"}])");
  send(conn, R"(["REQ","s2",{"ids":["abc"]}])");
  send(conn, R"(["REQ",")" + std::string(65, 'x') + R"(",{}])");
  auto frames = sinks[0]->take();
  ASSERT_EQ(frames.size(), 3u);
  EXPECT_EQ(verb(frames[0]), "CLOSED");
  EXPECT_NE(frames[0].find("invalid: "), std::string::npos);
  EXPECT_EQ(verb(frames[1]), "CLOSED");
  EXPECT_NE(frames[2].find("invalid: "), std::string::npos);
  EXPECT_TRUE(reader_log->held_requests.empty());
}

TEST_F(connection_test, ephemeral_events_are_fanned_out_and_never_ingested) {
  auto listener = open_authed(bob_sk);
  send(listener, R"(["REQ","typing",{"kinds":[20002]}])");
  history_next({});
  run();
  sinks[0]->take();
  auto publisher = open_authed(alice_sk);
  auto ev = make_event(alice_sk, 20002, "typing");
  send(publisher, frame("EVENT", ev.raw));
  EXPECT_EQ(sinks[1]->take(), std::vector<std::string>{proto::render_ok(ev.id, true, "")});
  EXPECT_EQ(sinks[0]->take(), std::vector<std::string>{proto::render_event("typing", ev.raw)});
  EXPECT_TRUE(ingest_log->held_requests.empty());
}

TEST_F(connection_test, count_answers_with_the_readers_count) {
  auto conn = open_authed();
  reader_log->count = 42;
  send(conn, R"(["COUNT","c",{"kinds":[1]}])");
  EXPECT_EQ(sinks[0]->take(), std::vector<std::string>{R"(["COUNT","c",{"count":42}])"});
}

TEST_F(connection_test, drain_answers_in_flight_events_then_closes_with_1001) {
  auto conn = open_authed();
  auto ev = make_event(alice_sk, 1, "in flight");
  send(conn, frame("EVENT", ev.raw));
  caf::anon_send(conn, drain_request{});
  run();
  EXPECT_FALSE(sinks[0]->close_code) << "waits for the in-flight event";
  auto late = make_event(alice_sk, 1, "too late");
  send(conn, frame("EVENT", late.raw));
  EXPECT_EQ(sinks[0]->take(), std::vector<std::string>{proto::render_ok(
                                late.id, false, "error: relay is shutting down")});
  commit_next(write_outcome::stored);
  EXPECT_EQ(sinks[0]->take(), std::vector<std::string>{proto::render_ok(ev.id, true, "")});
  EXPECT_EQ(sinks[0]->close_code, 1001);
}

TEST_F(connection_test, too_many_events_in_flight_are_rate_limited) {
  connection_settings settings;
  auto conn = open_authed();
  for (size_t i = 0; i < settings.max_events_in_flight; ++i)
    send(conn, frame("EVENT", make_event(alice_sk, 1, std::to_string(i)).raw));
  EXPECT_TRUE(sinks[0]->take().empty());
  auto over = make_event(alice_sk, 1, "over");
  send(conn, frame("EVENT", over.raw));
  auto frames = sinks[0]->take();
  ASSERT_EQ(frames.size(), 1u);
  EXPECT_NE(frames[0].find("rate-limited:"), std::string::npos);
}

}  // namespace

namespace {

// Red-team finding 1: the history query can see an event committed before the
// hub has it; when the hub's copy arrives after EOSE it must not be sent again.
TEST_F(connection_test, an_event_in_the_history_is_not_sent_again_when_it_arrives_live) {
  auto conn = open_authed();
  send(conn, R"(["REQ","s1",{"kinds":[1]}])");
  auto late = std::make_shared<const proto::event>(make_event(bob_sk, 1, "committed, hub lags"));
  history_next({late->raw});
  EXPECT_EQ(sinks[0]->take(), (std::vector<std::string>{proto::render_event("s1", late->raw),
                                                        proto::render_eose("s1")}));
  caf::anon_send(hub, committed_events{{ingest_item{1, late}}});
  run();
  EXPECT_TRUE(sinks[0]->take().empty()) << "exactly once per subscription";
}

// Red-team finding 2: the hub matched an event for the OLD filter of s1 while
// the client's REQ replacing s1 was already queued at the connection. The
// stale match must not leak into the new subscription.
TEST_F(connection_test, a_match_for_a_replaced_subscription_never_reaches_its_successor) {
  auto conn = open_authed();
  send(conn, R"(["REQ","s1",{"kinds":[1]}])");
  history_next({});
  sinks[0]->take();
  auto kind1 = std::make_shared<const proto::event>(make_event(bob_sk, 1, "for the old filter"));
  // Both are queued before anything runs: the connection handles the new REQ
  // first; the hub then matches kind1 against the old s1 (its unsubscribe is
  // still behind the event in the hub's mailbox).
  caf::anon_send(conn, socket_frame{R"(["REQ","s1",{"kinds":[7]}])"});
  caf::anon_send(hub, committed_events{{ingest_item{1, kind1}}});
  run();
  history_next({});
  EXPECT_EQ(sinks[0]->take(), std::vector<std::string>{proto::render_eose("s1")});
}

}  // namespace

namespace {

// A hub that holds each subscription's ack until told to release it.
struct held_acks {
  std::deque<caf::typed_response_promise<hub_ack>> promises;
};

caf::behavior withholding_hub(caf::event_based_actor* self, std::shared_ptr<held_acks> held) {
  return {
    [self, held](hub_subscribe&) {
      auto p = self->make_response_promise<hub_ack>();
      held->promises.push_back(p);
      return p;
    },
    [](hub_unsubscribe&) {},
    [](committed_events&) {},
    [held](caf::atom_value) {
      auto p = held->promises.front();
      held->promises.pop_front();
      p.deliver(hub_ack{});
    },
  };
}

class ordering_test : public connection_test {};

// A closed connection must leave nothing behind on the long-lived core
// actors: CAF 0.17 keeps each monitor (with a weak reference to the
// connection actor, which pins its whole allocation) on the monitored actor
// until the observer demonitors. Churn then grew the relay by 1.7 KB per
// connection, without bound.
TEST_F(connection_test, a_closed_connection_leaves_no_reference_on_its_peers) {
  caf::weak_actor_ptr watched;
  {
    auto conn = open_authed();
    watched = caf::actor_cast<caf::weak_actor_ptr>(conn);
    forget(conn.address());
    caf::anon_send(conn, socket_closed{});
    run();
  }
  // Timers the connection set (its delayed messages hold it until they fire).
  while (sched().has_pending_timeout()) {
    sched().trigger_timeouts();
    run();
  }
  ASSERT_TRUE(watched);
  EXPECT_EQ(watched->weak_refs.load(), 1u) << "only this test's own weak reference; strong " << watched->strong_refs.load();
}

// The gap-freedom of REQ rests on this order: the history query is issued
// only after the hub has indexed the subscription.
TEST_F(ordering_test, history_is_queried_only_after_the_hub_acknowledges) {
  auto held = std::make_shared<held_acks>();
  auto slow_hub_raw = spawn(withholding_hub, held);
  connection_settings settings;
  settings.community_id = 1;
  settings.host = "chat.example";
  auto sink = std::make_shared<recording_sink>();
  auto conn = spawn(connection_actor_impl, settings,
                    connection_peers{ingest, caf::actor_cast<hub_actor>(slow_hub_raw), reader, {}, {}, {}},
                    test_env(now), sink);
  run();
  send(conn, auth_frame(alice_sk, "challenge-1"));
  send(conn, R"(["REQ","s1",{"kinds":[1]}])");
  ASSERT_EQ(held->promises.size(), 1u);
  EXPECT_TRUE(reader_log->held_requests.empty()) << "no history before the hub's ack";
  caf::anon_send(slow_hub_raw, caf::atom("ack"));
  run();
  EXPECT_EQ(reader_log->held_requests.size(), 1u);
  held->promises.clear();
}

}  // namespace
