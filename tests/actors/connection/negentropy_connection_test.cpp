// The connection actor's NIP-77 frames (actors/connection/connection_negentropy.cpp) under
// test_coordinator: a whole reconciliation through the actor against the reader's set, and
// every refusal as a NEG-ERR that leaves nothing behind.

#include "actors/connection/connection_actor.hpp"
#include "actors/fanout/hub_actor.hpp"
#include "messages/proto/client_message.hpp"
#include "messages/proto/negentropy.hpp"
#include "tests/actors/actor_fixture.hpp"
#include "tests/support/event_builder.hpp"

#include <rapidjson/document.h>

#include <set>

using namespace waggle;
using namespace waggle::testing;
namespace neg = waggle::proto::negentropy;

namespace {

constexpr int64_t now = 1'700'000'000;
const std::string alice_sk(64, '1');

std::string id_hex(int n) {
  std::string id(64, '0');
  auto digits = std::to_string(n * 7919 + 13);
  id.replace(64 - digits.size(), digits.size(), digits);
  // Spread the ids so they do not share long prefixes.
  id[0] = "0123456789abcdef"[n % 16];
  id[1] = "0123456789abcdef"[(n / 16) % 16];
  return id;
}

rapidjson::Document parse(const std::string& text) {
  rapidjson::Document d;
  d.Parse(text.c_str(), text.size());
  EXPECT_FALSE(d.HasParseError()) << text;
  return d;
}

class negentropy_connection_test : public actor_test {
 protected:
  negentropy_connection_test() {
    ingest_raw = spawn(fake_ingest, ingest_log);
    reader_raw = spawn(fake_reader, reader_log);
    hub = spawn(hub_actor_impl, test_env());
    run();
  }

  connection_actor open_authed(negentropy_settings neg_settings = {}) {
    connection_settings settings;
    settings.community_id = 7;
    settings.host = "chat.example";
    settings.reads.max_in_flight = 1000;
    settings.negentropy = neg_settings;
    settings.subscription_budget = budget;
    settings.negentropy_budget = budget;
    sink = std::make_shared<recording_sink>();
    auto conn = spawn(connection_actor_impl, settings,
                      connection_peers{caf::actor_cast<ingest_actor>(ingest_raw), hub,
                                       caf::actor_cast<reader_pool_actor>(reader_raw), {}, {}, {}},
                      test_env(now), sink);
    run();
    sink->take();
    auto auth = test::event_builder{alice_sk}.kind(22242)
                  .tags({{"relay", "ws://chat.example:7777/"}, {"challenge", "challenge-1"}})
                  .at(now).sign();
    send(conn, "[\"AUTH\"," + auth.raw + "]");
    sink->take();
    return conn;
  }

  void send(const connection_actor& conn, std::string text) {
    caf::anon_send(conn, socket_frame{std::move(text)});
    run();
  }

  // The one frame the connection sent since the last call.
  std::string one_frame() {
    auto frames = sink->take();
    EXPECT_EQ(frames.size(), 1u);
    return frames.empty() ? std::string() : frames[0];
  }

  std::shared_ptr<fake_ingest_log> ingest_log = std::make_shared<fake_ingest_log>();
  std::shared_ptr<fake_reader_log> reader_log = std::make_shared<fake_reader_log>();
  std::shared_ptr<memory_budget> budget = std::make_shared<memory_budget>(0);
  caf::actor ingest_raw, reader_raw;
  hub_actor hub;
  std::shared_ptr<recording_sink> sink;
};

TEST_F(negentropy_connection_test, a_whole_reconciliation_runs_against_the_readers_set) {
  // The relay holds ids 0..2999 but 100..199; the client 0..2999 but 2000..2099.
  std::string packed;
  neg::storage client;
  std::set<std::string> only_relay, only_client;
  for (int i = 0; i < 3000; ++i) {
    auto id = id_hex(i);
    std::string bin;
    neg::from_hex(id, bin);
    const uint64_t ts = now - 3000 + i / 3;
    if (i < 100 || i >= 200)
      neg::append_packed(packed, ts, id);
    if (i < 2000 || i >= 2100)
      client.insert(ts, bin);
    if (i >= 100 && i < 200)
      only_client.insert(id);
    if (i >= 2000 && i < 2100)
      only_relay.insert(id);
  }
  client.seal();
  reader_log->sync_reply.packed = packed;
  reader_log->sync_reply.count = packed.size() / neg::packed_item_bytes;
  auto conn = open_authed();

  neg::reconciler initiator(client, 0);
  send(conn, R"(["NEG-OPEN","n",{"kinds":[1]},")" + neg::to_hex(initiator.initiate()) + "\"]");
  ASSERT_EQ(reader_log->sync_asked.size(), 1u);
  EXPECT_EQ(reader_log->sync_asked[0].community_id, 7);
  EXPECT_EQ(reader_log->sync_asked[0].max_items, negentropy_settings{}.max_items);
  ASSERT_EQ(reader_log->sync_asked[0].filters.size(), 1u);
  EXPECT_GT(budget->used(), 0u);  // the set is charged to the node while it lives

  std::set<std::string> have, need;
  for (int round = 0; round < 50; ++round) {
    auto d = parse(one_frame());
    ASSERT_STREQ(d[0].GetString(), "NEG-MSG");
    std::string answer;
    ASSERT_TRUE(neg::from_hex(d[2].GetString(), answer));
    auto next = initiator.reconcile(answer);
    ASSERT_EQ(next.error, "");
    for (auto& id : next.have)
      have.insert(neg::to_hex(id));
    for (auto& id : next.need)
      need.insert(neg::to_hex(id));
    if (next.message.empty())
      break;
    send(conn, R"(["NEG-MSG","n",")" + neg::to_hex(next.message) + "\"]");
  }
  EXPECT_EQ(have, only_client);
  EXPECT_EQ(need, only_relay);
  send(conn, R"(["NEG-CLOSE","n"])");
  EXPECT_TRUE(sink->take().empty());
  EXPECT_EQ(budget->used(), 0u);
}

TEST_F(negentropy_connection_test, refusals_are_neg_errs_with_reasons) {
  auto conn = open_authed();
  // Malformed hex, a search filter, an unknown session: each named.
  send(conn, R"(["NEG-OPEN","a",{},"zz"])");
  EXPECT_NE(one_frame().find(R"(["NEG-ERR","a","invalid:)"), std::string::npos);
  send(conn, R"(["NEG-OPEN","b",{"search":"x"},"61"])");
  EXPECT_NE(one_frame().find(R"(["NEG-ERR","b","blocked:)"), std::string::npos);
  send(conn, R"(["NEG-MSG","c","61"])");
  EXPECT_NE(one_frame().find(R"(["NEG-ERR","c","closed:)"), std::string::npos);
  // The reader's access refusal reaches the client as it came.
  reader_log->sync_reply.err = status{ec::restricted, "not a member of this channel"};
  send(conn, R"(["NEG-OPEN","d",{"#h":["secret"]},"61"])");
  EXPECT_EQ(one_frame(), proto::render_neg_err("d", "restricted: not a member of this channel"));
  // Too many matches: refused, nothing held.
  reader_log->sync_reply = {};
  reader_log->sync_reply.too_many = true;
  send(conn, R"(["NEG-OPEN","e",{},"61"])");
  EXPECT_NE(one_frame().find(R"(["NEG-ERR","e","blocked: the filter matches more than)"),
            std::string::npos);
  EXPECT_EQ(budget->used(), 0u);
  send(conn, R"(["NEG-MSG","e","61"])");
  EXPECT_NE(one_frame().find("closed:"), std::string::npos);
}

TEST_F(negentropy_connection_test, before_auth_and_when_off_nothing_is_read) {
  negentropy_settings off;
  off.enabled = false;
  auto conn = open_authed(off);
  send(conn, R"(["NEG-OPEN","a",{},"61"])");
  EXPECT_NE(one_frame().find(R"(["NEG-ERR","a","blocked: NIP-77)"), std::string::npos);
  EXPECT_TRUE(reader_log->sync_asked.empty());
}

TEST_F(negentropy_connection_test, sessions_per_connection_are_capped) {
  negentropy_settings two;
  two.max_sessions = 2;
  auto conn = open_authed(two);
  send(conn, R"(["NEG-OPEN","a",{},"61"])");
  send(conn, R"(["NEG-OPEN","b",{},"61"])");
  sink->take();
  send(conn, R"(["NEG-OPEN","c",{},"61"])");
  EXPECT_NE(one_frame().find(R"(["NEG-ERR","c","blocked: too many negentropy sessions)"),
            std::string::npos);
  // Re-opening an open id replaces it and is not a third session.
  send(conn, R"(["NEG-OPEN","a",{},"61"])");
  EXPECT_EQ(parse(one_frame())[0].GetString(), std::string("NEG-MSG"));
  // A closed one frees its place.
  send(conn, R"(["NEG-CLOSE","b"])");
  send(conn, R"(["NEG-OPEN","c",{},"61"])");
  EXPECT_EQ(parse(one_frame())[0].GetString(), std::string("NEG-MSG"));
}

TEST_F(negentropy_connection_test, a_close_while_reading_withdraws_the_read_and_drops_its_answer) {
  reader_log->hold_syncs = true;
  auto conn = open_authed();
  send(conn, R"(["NEG-OPEN","a",{},"61"])");
  ASSERT_EQ(reader_log->sync_requests.size(), 1u);
  send(conn, R"(["NEG-CLOSE","a"])");
  ASSERT_EQ(reader_log->withdrawals.size(), 1u);
  EXPECT_EQ(reader_log->withdrawals[0].requests.size(), 1u);
  // The answer arrives anyway (it was already running): nothing is sent, nothing held.
  caf::anon_send(reader_raw, caf::atom("reply"), sync_items_reply{});
  run();
  EXPECT_TRUE(sink->take().empty());
  EXPECT_EQ(budget->used(), 0u);
  send(conn, R"(["NEG-MSG","a","61"])");
  EXPECT_NE(one_frame().find("closed:"), std::string::npos);
}

}  // namespace
