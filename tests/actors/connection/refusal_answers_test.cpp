// Which answers of the connection actor count against its refusal pace
// (docs/protocol.md, "Refusal pacing"; issue 13, red-team findings 2, 3 and
// 7): every OK false, CLOSED and NOTICE goes through one place that decides by
// the prefix, AUTH costs at most one Schnorr verify per new proof, and a
// client that opens its subscriptions before it authenticates is not paused.
// Driven by test_coordinator; its clock stands still, so nothing is forgiven
// while a test runs and every count below is exact.

#include "actors/connection/connection_actor.hpp"
#include "actors/fanout/hub_actor.hpp"
#include "messages/proto/client_message.hpp"
#include "tests/actors/actor_fixture.hpp"
#include "tests/support/event_builder.hpp"

using namespace waggle;
using namespace waggle::testing;
using namespace std::chrono_literals;

namespace {

constexpr int64_t now = 1'700'000'000;
const std::string alice_sk(64, '1');
const std::string bob_sk(64, '2');

// Records the pauses the connection asks of its socket, besides its frames.
struct pausing_sink : recording_sink {
  std::vector<std::chrono::milliseconds> pauses;
  void pause_reading(std::chrono::milliseconds how_long) override { pauses.push_back(how_long); }
};

proto::event make_event(const std::string& sk, int32_t kind, std::string content,
                        std::vector<proto::tag> tags = {}, int64_t created_at = now) {
  return test::event_builder{sk}.kind(kind).content(std::move(content)).tags(std::move(tags))
    .at(created_at).sign();
}

std::string frame(std::string_view verb, const std::string& json) {
  return "[\"" + std::string{verb} + "\"," + json + "]";
}

proto::event auth_event(const std::string& sk, const std::string& challenge = "challenge-1",
                        int64_t created_at = now, std::string content = "") {
  return make_event(sk, 22242, std::move(content),
                    {{"relay", "ws://chat.example/"}, {"challenge", challenge}}, created_at);
}

// The same event with one nibble of its signature flipped: its id still
// matches its content, its signature no longer verifies.
std::string tamper_sig(std::string raw) {
  auto pos = raw.find("\"sig\":\"") + 7;
  raw[pos] = raw[pos] == '0' ? '1' : '0';
  return raw;
}

bool is_ok_true(const std::string& f) { return f.find(",true,") != std::string::npos; }

// A reader whose every COUNT ran out of its statement_timeout.
caf::behavior slow_reader(caf::event_based_actor*) {
  return {
    [](count_request&) { return count_reply{0, {ec::unavailable, "query took too long"}}; },
    [](read_withdraw&) {},
  };
}

class refusal_answers_test : public actor_test {
 protected:
  refusal_answers_test() {
    ingest_raw = spawn(fake_ingest, ingest_log);
    ingest = caf::actor_cast<ingest_actor>(ingest_raw);
    reader = caf::actor_cast<reader_pool_actor>(spawn(fake_reader, reader_log));
    hub = spawn(hub_actor_impl, test_env());
    run();
  }
  ~refusal_answers_test() override {
    ingest_log->held_requests.clear();
    reader_log->held_requests.clear();
  }

  // The default pace (burst 100, 20/s); the test clock never forgives any.
  connection_actor open(size_t max_auth_keys = 16) {
    connection_settings settings;
    settings.community_id = 1;
    settings.host = "chat.example";
    settings.max_auth_keys = max_auth_keys;
    settings.reads.max_in_flight = 100000;  // the read bound is not what is tested here
    settings.reads.per_connection = {0, 0};
    sink = std::make_shared<pausing_sink>();
    auto conn = spawn(connection_actor_impl, settings,
                      connection_peers{ingest, hub, reader, {}, {}, {}}, test_env(now), sink);
    run();
    sink->take();  // the challenge
    return conn;
  }

  void send(const connection_actor& conn, std::string text) {
    caf::anon_send(conn, socket_frame{std::move(text)});
    run();
  }

  connection_actor open_authed() {
    auto conn = open();
    send(conn, frame("AUTH", auth_event(alice_sk).raw));
    EXPECT_TRUE(is_ok_true(sink->take().at(0)));
    return conn;
  }

  void commit_next(write_outcome outcome, std::string reason = {}) {
    caf::anon_send(ingest_raw, caf::atom("reply"), static_cast<int>(outcome), std::move(reason));
    run();
  }

  std::shared_ptr<fake_ingest_log> ingest_log = std::make_shared<fake_ingest_log>();
  std::shared_ptr<fake_reader_log> reader_log = std::make_shared<fake_reader_log>();
  caf::actor ingest_raw;
  ingest_actor ingest;
  reader_pool_actor reader;
  hub_actor hub;
  std::shared_ptr<pausing_sink> sink;
};

}  // namespace

// Finding 2: the AUTH event that proved a key, replayed, is answered from
// memory. The replay carries a broken signature: a verify would refuse it,
// so its OK true shows that none ran; and a loop of replays is never paused.
TEST_F(refusal_answers_test, a_repeated_identical_auth_is_answered_without_a_verify) {
  auto conn = open();
  auto ev = auth_event(alice_sk);
  send(conn, frame("AUTH", ev.raw));
  ASSERT_EQ(sink->take(), std::vector<std::string>{proto::render_ok(ev.id, true, "")});
  auto replay = frame("AUTH", tamper_sig(ev.raw));
  for (int i = 0; i < 300; ++i)
    send(conn, replay);
  auto frames = sink->take();
  ASSERT_EQ(frames.size(), 300u);
  for (auto& f : frames)
    ASSERT_EQ(f, proto::render_ok(ev.id, true, "")) << "answered as the first time, no verify";
  EXPECT_TRUE(sink->pauses.empty());
}

// Before the key is proven a tampered AUTH is verified and refused, and the
// memory is of proofs only: a refused AUTH sent again is verified again.
TEST_F(refusal_answers_test, only_a_proven_auth_is_remembered) {
  auto conn = open();
  auto ev = auth_event(alice_sk);
  send(conn, frame("AUTH", tamper_sig(ev.raw)));
  send(conn, frame("AUTH", tamper_sig(ev.raw)));
  auto frames = sink->take();
  ASSERT_EQ(frames.size(), 2u);
  for (auto& f : frames)
    EXPECT_NE(f.find("invalid: bad signature"), std::string::npos) << f;
  // Bob's proof does not vouch for Alice's event.
  send(conn, frame("AUTH", auth_event(bob_sk).raw));
  ASSERT_TRUE(is_ok_true(sink->take().at(0)));
  send(conn, frame("AUTH", tamper_sig(ev.raw)));
  EXPECT_NE(sink->take().at(0).find("invalid: bad signature"), std::string::npos);
}

// Finding 2: failed AUTHs (bad signature, wrong challenge, stale created_at)
// are refusals like any other: past the burst the socket stops reading.
TEST_F(refusal_answers_test, failed_auths_are_paced) {
  auto conn = open();
  for (int i = 0; i < 100; ++i) {
    auto kind = i % 3;
    auto ev = kind == 0   ? tamper_sig(auth_event(alice_sk, "challenge-1", now - i).raw)
              : kind == 1 ? auth_event(alice_sk, "challenge-0", now - i).raw
                          : auth_event(alice_sk, "challenge-1", now - 61 - i).raw;
    send(conn, frame("AUTH", ev));
  }
  EXPECT_TRUE(sink->pauses.empty()) << "the burst is free";
  send(conn, frame("AUTH", tamper_sig(auth_event(alice_sk, "challenge-1", now + 1).raw)));
  ASSERT_EQ(sink->pauses.size(), 1u);
  EXPECT_EQ(sink->pauses[0], 50ms);  // one refusal of debt at 20/s
  EXPECT_EQ(sink->take().size(), 101u) << "every AUTH is still answered";
}

// Finding 2: a new key's verify is bounded by max_auth_keys; fresh proofs of
// a key already proven (each a new event, so each verified) count against
// the pace, so one connection's verifies stay within it.
TEST_F(refusal_answers_test, fresh_proofs_of_a_proven_key_are_paced) {
  auto conn = open();
  const std::vector<std::string> keys = {alice_sk, bob_sk, std::string(64, '3')};
  for (auto& sk : keys)
    send(conn, frame("AUTH", auth_event(sk).raw));
  // Each a valid proof, and each a new event (its content differs).
  for (int i = 1; i <= 100; ++i)
    send(conn, frame("AUTH", auth_event(alice_sk, "challenge-1", now, std::to_string(i)).raw));
  EXPECT_TRUE(sink->pauses.empty()) << "new keys are free, and then the burst";
  send(conn, frame("AUTH", auth_event(alice_sk, "challenge-1", now, "one more").raw));
  ASSERT_EQ(sink->pauses.size(), 1u);
  auto frames = sink->take();
  ASSERT_EQ(frames.size(), 104u);
  for (auto& f : frames)
    EXPECT_TRUE(is_ok_true(f)) << "paced, not refused: " << f;
}

// The key limit is checked before the signature: a key over it costs no
// verify (its broken signature is never looked at) and is paced.
TEST_F(refusal_answers_test, a_key_over_the_limit_is_refused_before_its_signature) {
  auto conn = open(1);
  send(conn, frame("AUTH", auth_event(alice_sk).raw));
  ASSERT_TRUE(is_ok_true(sink->take().at(0)));
  auto bob = auth_event(bob_sk);
  send(conn, frame("AUTH", tamper_sig(bob.raw)));
  EXPECT_EQ(sink->take(),
            std::vector<std::string>{proto::render_ok(
              bob.id, false, "rate-limited: too many keys on this connection")});
}

// Finding 3: an EVENT refused at admission for a bad signature is paced.
TEST_F(refusal_answers_test, a_flood_of_bad_signature_events_pauses_the_socket) {
  auto conn = open_authed();
  for (int i = 0; i < 101; ++i)
    send(conn, frame("EVENT", tamper_sig(make_event(alice_sk, 1, std::to_string(i)).raw)));
  ASSERT_EQ(sink->pauses.size(), 1u);
  auto frames = sink->take();
  ASSERT_EQ(frames.size(), 101u);
  EXPECT_NE(frames.back().find("invalid: bad signature"), std::string::npos);
  EXPECT_TRUE(ingest_log->held_requests.empty());
}

// Finding 3: verdicts that come back later (here ingest's: the database
// refused them, blocked: or restricted:) are paced as admission's are, even
// with the events all in flight at once.
TEST_F(refusal_answers_test, refusals_from_ingest_are_paced) {
  auto conn = open_authed();
  for (int i = 0; i < 120; ++i)
    send(conn, frame("EVENT", make_event(alice_sk, 1, std::to_string(i)).raw));
  ASSERT_EQ(ingest_log->held_requests.size(), 120u);
  const write_outcome verdicts[] = {write_outcome::rejected, write_outcome::blocked,
                                    write_outcome::refused};
  for (int i = 0; i < 100; ++i)
    commit_next(verdicts[i % 3], "no");
  EXPECT_TRUE(sink->pauses.empty());
  commit_next(write_outcome::blocked, "no");
  ASSERT_EQ(sink->pauses.size(), 1u);
  EXPECT_EQ(sink->take().size(), 101u);
}

// Finding 3: duplicate: is a normal resend after a lost OK, and node-side
// error: is no fault of the client's: neither is ever paced.
TEST_F(refusal_answers_test, node_errors_are_never_paced_and_resends_count_half) {
  auto conn = open_authed();
  // 150 failed (the node's trouble), past the burst of 100 on their own,
  // and 198 resends (duplicate:, half each: 99).
  for (int i = 0; i < 348; ++i)
    send(conn, frame("EVENT", make_event(alice_sk, 1, std::to_string(i)).raw));
  for (int i = 0; i < 348; ++i)
    commit_next(i < 150 ? write_outcome::failed
                : i % 2 ? write_outcome::duplicate
                        : write_outcome::superseded);
  EXPECT_EQ(sink->take().size(), 348u);
  EXPECT_TRUE(sink->pauses.empty());
  // Red-team finding 3 of the second review: every resend of a stored event
  // costs a verify and a database round trip, so a flood of them is paced.
  for (int i = 0; i < 4; ++i)
    send(conn, frame("EVENT", make_event(alice_sk, 1, "again " + std::to_string(i)).raw));
  for (int i = 0; i < 4; ++i)
    commit_next(write_outcome::duplicate);
  EXPECT_EQ(sink->take().size(), 4u);
  EXPECT_EQ(sink->pauses.size(), 1u);
}

// Finding 3: a read the database ended (statement_timeout) was made slow by
// the client's own filters: its CLOSED is paced.
TEST_F(refusal_answers_test, a_count_that_took_too_long_is_paced) {
  reader = caf::actor_cast<reader_pool_actor>(spawn(slow_reader));
  auto conn = open_authed();
  for (int i = 0; i < 101; ++i)
    send(conn, R"(["COUNT","c)" + std::to_string(i) + R"(",{"kinds":[1]}])");
  auto frames = sink->take();
  ASSERT_EQ(frames.size(), 101u);
  EXPECT_EQ(frames.back(), proto::render_closed("c100", "error: query took too long"));
  EXPECT_EQ(sink->pauses.size(), 1u);
}

// Finding 7: a client that opens its subscriptions and then authenticates
// (150 REQs, more than any client opens) is not paused, and its AUTH works.
TEST_F(refusal_answers_test, reqs_before_auth_then_auth_are_not_paused) {
  auto conn = open();
  for (int i = 0; i < 150; ++i)
    send(conn, R"(["REQ","s)" + std::to_string(i) + R"(",{"kinds":[1]}])");
  auto frames = sink->take();
  ASSERT_EQ(frames.size(), 150u);
  EXPECT_NE(frames.back().find("auth-required:"), std::string::npos);
  send(conn, frame("AUTH", auth_event(alice_sk).raw));
  EXPECT_TRUE(is_ok_true(sink->take().at(0)));
  send(conn, R"(["REQ","s0",{"kinds":[1]}])");
  EXPECT_EQ(reader_log->held_requests.size(), 1u);
  EXPECT_TRUE(sink->pauses.empty());
}

// Red-team finding 4 of the second review: a large REQ refused before AUTH
// was parsed whole, so it counts by its size (60 KB: 3.75), not a tenth.
TEST_F(refusal_answers_test, large_frames_before_auth_count_by_their_size) {
  auto conn = open();
  std::string values;
  for (int i = 0; i < 500; ++i)
    values += (i ? "," : "") + std::string("\"") + std::string(100, 'a' + i % 26) + "\"";
  const std::string big = R"(,{"#t":[)" + values + "]}]";
  ASSERT_GT(big.size(), 50'000u);
  // 26 x ~3.1 = ~81 of the burst of 100: free; a few more pause.
  for (int i = 0; i < 26; ++i)
    send(conn, R"(["REQ","s)" + std::to_string(i) + "\"" + big);
  EXPECT_TRUE(sink->pauses.empty());
  for (int i = 26; i < 34; ++i)
    send(conn, R"(["REQ","s)" + std::to_string(i) + "\"" + big);
  auto frames = sink->take();
  ASSERT_EQ(frames.size(), 34u) << "every frame is answered";
  for (auto& f : frames)
    EXPECT_NE(f.find("auth-required:"), std::string::npos) << f.substr(0, 80);
  EXPECT_FALSE(sink->pauses.empty());
}

// Finding 7's bound: an unauthenticated flood is still paced, each
// auth-required: counting a tenth (1,000 are free).
TEST_F(refusal_answers_test, an_unauthenticated_flood_is_still_paced) {
  auto conn = open();
  for (int i = 0; i < 1000; ++i)
    send(conn, R"(["COUNT","c)" + std::to_string(i) + R"(",{}])");
  EXPECT_TRUE(sink->pauses.empty());
  for (int i = 0; i < 10; ++i)
    send(conn, frame("EVENT", make_event(alice_sk, 1, std::to_string(i)).raw));
  ASSERT_EQ(sink->pauses.size(), 1u);
  EXPECT_EQ(sink->take().size(), 1010u);
}
