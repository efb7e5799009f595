// Red team (NIP-77 in the connection actor): what one connection's sets take
// from the node-wide budget other communities' REQs live on, and a NEG-MSG
// sent before NEG-OPEN's answer, which drops the session but leaves its read
// queued at the pool.

#include "actors/connection/connection_actor.hpp"
#include "actors/fanout/hub_actor.hpp"
#include "messages/proto/client_message.hpp"
#include "messages/proto/negentropy.hpp"
#include "tests/actors/actor_fixture.hpp"
#include "tests/support/event_builder.hpp"

#include <set>

using namespace waggle;
using namespace waggle::testing;
namespace neg = waggle::proto::negentropy;

namespace {

constexpr int64_t now = 1'700'000'000;
const std::string alice_sk(64, '1');
const std::string bob_sk(64, '2');

std::string packed_of(size_t n) {
  std::string packed;
  packed.reserve(n * neg::packed_item_bytes);
  for (size_t i = 0; i < n; ++i) {
    char hex[65];
    std::snprintf(hex, sizeof hex, "%064zx", i * 2654435761u + 1);
    neg::append_packed(packed, now - 100000 + i, hex);
  }
  return packed;
}

class negentropy_redteam_test : public actor_test {
 protected:
  negentropy_redteam_test() {
    ingest_raw = spawn(fake_ingest, ingest_log);
    reader_raw = spawn(fake_reader, reader_log);
    hub = spawn(hub_actor_impl, test_env());
    run();
  }

  struct conn_t {
    connection_actor actor;
    std::shared_ptr<recording_sink> sink;
  };

  conn_t open(int64_t community, const std::string& host, const std::string& sk,
             std::set<std::string> sync_pubkeys = {}) {
    connection_settings settings;
    settings.sync_pubkeys = std::move(sync_pubkeys);
    settings.community_open = true;
    settings.community_id = community;
    settings.host = host;
    settings.reads.max_in_flight = 1000;
    settings.subscription_budget = budget;
    settings.negentropy_budget = neg_budget;  // as the node wires it: a budget of its own
    auto sink = std::make_shared<recording_sink>();
    auto conn = spawn(connection_actor_impl, settings,
                      connection_peers{caf::actor_cast<ingest_actor>(ingest_raw), hub,
                                       caf::actor_cast<reader_pool_actor>(reader_raw), {}, {}, {}},
                      test_env(now), sink);
    run();
    sink->take();
    auto auth = test::event_builder{sk}.kind(22242)
                  .tags({{"relay", "ws://" + host + ":7777/"}, {"challenge", "challenge-1"}})
                  .at(now).sign();
    send(conn, "[\"AUTH\"," + auth.raw + "]");
    sink->take();
    return {conn, sink};
  }

  void send(const connection_actor& conn, std::string text) {
    caf::anon_send(conn, socket_frame{std::move(text)});
    run();
  }

  std::shared_ptr<fake_ingest_log> ingest_log = std::make_shared<fake_ingest_log>();
  std::shared_ptr<fake_reader_log> reader_log = std::make_shared<fake_reader_log>();
  // The node's subscription budget, scaled down 16x from the default 256 MiB
  // (as the sets below are scaled down 16x from --max-neg-items 500,000).
  std::shared_ptr<memory_budget> budget = std::make_shared<memory_budget>(16u << 20);
  std::shared_ptr<memory_budget> neg_budget = std::make_shared<memory_budget>(16u << 20);
  caf::actor ingest_raw, reader_raw;
  hub_actor hub;
};

// One authenticated client of community A (any key, an open community) holds
// sets of --max-neg-items: 4 sessions may take 4 x 36 MB of the 256 MiB
// budget from one connection (its own REQs are capped at 1 MiB), and there is
// no per-connection, per-key, per-address or per-community cap on it, nor an
// idle timeout. Two sessions here take the whole (scaled) budget; then a REQ
// of another community on another connection is refused.
TEST_F(negentropy_redteam_test, one_connections_sets_do_not_starve_other_communities_reqs) {
  reader_log->sync_reply.packed = packed_of(500000 / 16);
  reader_log->sync_reply.count = 500000 / 16;
  // Two connections of the same client (64 are allowed per address).
  size_t opened = 0;
  std::vector<conn_t> held;
  for (int c = 0; c < 2; ++c) {
    auto a = open(7, "a.example", alice_sk);
    for (const char* id : {"s1", "s2", "s3", "s4"})
      send(a.actor, std::string("[\"NEG-OPEN\",\"") + id + "\",{},\"61\"]");
    for (auto& f : a.sink->take())
      opened += f.rfind("[\"NEG-MSG\"", 0) == 0 ? 1 : 0;
    held.push_back(a);
  }
  // The rest in smaller sets (narrower filters, e.g. since/until), each size until refused.
  for (size_t items : {1000, 10, 1}) {
    reader_log->sync_reply.packed = packed_of(items);
    reader_log->sync_reply.count = items;
    for (bool full = false; !full && held.size() < 64;) {
      auto a = open(7, "a.example", alice_sk);
      for (const char* id : {"s1", "s2", "s3", "s4"})
        send(a.actor, std::string("[\"NEG-OPEN\",\"") + id + "\",{},\"61\"]");
      for (auto& f : a.sink->take()) {
        opened += f.rfind("[\"NEG-MSG\"", 0) == 0 ? 1 : 0;
        full = full || f.find("too many negentropy sets") != std::string::npos;
      }
      held.push_back(a);
    }
  }
  std::printf("community A: %zu sessions open on %zu connections, NIP-77 budget %zu of %zu bytes used\n",
              opened, held.size(), neg_budget->used(), neg_budget->limit());

  auto b = open(8, "b.example", bob_sk);
  send(b.actor, R"(["REQ","feed",{"kinds":[1]}])");
  auto answer = b.sink->take();
  for (auto& f : answer)
    EXPECT_EQ(f.find("rate-limited"), std::string::npos)
      << "community B's REQ refused because of community A's NIP-77 sets: " << f;
  // What B's REQ got instead: its history read went to the reader.
  EXPECT_EQ(reader_log->held_requests.size(), 1u);
}

// A NEG-MSG before the first answer drops the session (NEG-ERR invalid:) but
// neither withdraws its read from the pool nor frees its read slot: the read
// runs for nobody, as NEG-CLOSE promises it never does.
TEST_F(negentropy_redteam_test, a_neg_msg_before_the_answer_withdraws_the_read) {
  reader_log->hold_syncs = true;
  auto a = open(7, "a.example", alice_sk);
  send(a.actor, R"(["NEG-OPEN","x",{},"61"])");
  ASSERT_EQ(reader_log->sync_requests.size(), 1u);
  send(a.actor, R"(["NEG-MSG","x","61"])");
  auto f = a.sink->take();
  ASSERT_EQ(f.size(), 1u);
  EXPECT_NE(f[0].find("NEG-MSG before the answer"), std::string::npos);
  EXPECT_EQ(reader_log->withdrawals.size(), 1u) << "the dropped session's read stays queued";
}

// --sync-pubkeys: an authenticated sync key's events are "vouched for as an
// import would be" (docs/negentropy.md). But the import loader refuses NIP-43
// requests and never delivers ephemeral events, while the WebSocket waives
// the created_at window for them too: a sync key's connection can replay a
// year-old ephemeral event of another author to live subscribers (and, the
// same way, a year-old NIP-43 leave request, which the membership actor
// applies with no created_at check of its own: the member is removed).
// `waggle sync --dir up` sends only stored events; it never needs either.
TEST_F(negentropy_redteam_test, a_sync_key_vouches_only_for_what_sync_sends) {
  auto a = open(7, "a.example", alice_sk, {proto::pubkey_of(alice_sk)});
  auto old = test::event_builder{bob_sk}.kind(20001).at(now - 365 * 86400).content("replayed").sign();
  send(a.actor, "[\"EVENT\"," + old.raw + "]");
  auto f = a.sink->take();
  ASSERT_EQ(f.size(), 1u);
  EXPECT_NE(f[0].find("false"), std::string::npos)
    << "a year-old ephemeral event of another author was accepted: " << f[0];
}

}  // namespace
