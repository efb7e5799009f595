// End to end through real sockets: a whole node (actors, gateway, PostgreSQL)
// on an ephemeral port, driven by a WebSocket client as a Nostr client would.
// Needs WAGGLE_TEST_DATABASE_URL (fails, never skips, without it).

#include <chrono>
#include <filesystem>
#include <thread>

#include <gtest/gtest.h>
#include <openssl/sha.h>
#include <rapidjson/document.h>

#include "messages/proto/nip98.hpp"
#include "tests/e2e/node_fixture.hpp"

using namespace waggle;
using namespace std::chrono_literals;

namespace {

using namespace waggle::e2e;

TEST_F(node_e2e, publish_then_read_back_history_and_receive_live_events) {
  auto a = login("alpha.test", alice);
  auto first = signed_event(alice, 1, "first post");
  EXPECT_EQ(publish(*a, first), proto::render_ok(first.id, true, ""));
  EXPECT_EQ(publish(*a, first), proto::render_ok(first.id, true, "duplicate: already have this event"));

  auto b = login("alpha.test", bob);
  auto ids = history(*b, "h", R"({"authors":[")" + proto::pubkey_of(alice) + R"("]})");
  EXPECT_EQ(ids, std::vector<std::string>{first.id});

  auto live = signed_event(alice, 1, "live post");
  EXPECT_EQ(publish(*a, live), proto::render_ok(live.id, true, ""));
  auto f = b->read_text(10s);
  ASSERT_TRUE(f.has_value());
  EXPECT_EQ(*f, proto::render_event("h", live.raw));

  b->send_text(R"(["COUNT","c",{"authors":[")" + proto::pubkey_of(alice) + R"("]}])");
  auto count = b->read_text(10s);
  EXPECT_EQ(count.value_or(""), R"(["COUNT","c",{"count":2}])");
}

TEST_F(node_e2e, communities_never_see_each_other) {
  auto a = login("alpha.test", alice);
  auto secret_plan = signed_event(alice, 1, "alpha only");
  EXPECT_EQ(publish(*a, secret_plan), proto::render_ok(secret_plan.id, true, ""));
  auto b = login("BETA.test:443", bob);  // case and port do not matter
  EXPECT_EQ(history(*b, "x", R"({"ids":[")" + secret_plan.id + R"("]})"),
            std::vector<std::string>{});
  // Live, too: a beta subscriber to everything sees nothing from alpha.
  EXPECT_EQ(history(*b, "all", "{}"), std::vector<std::string>{});
  auto more = signed_event(alice, 1, "alpha again");
  EXPECT_EQ(publish(*a, more), proto::render_ok(more.id, true, ""));
  EXPECT_FALSE(b->read_text(300ms).has_value());
}

TEST_F(node_e2e, unknown_hosts_get_404_for_http_and_upgrades) {
  auto r = gateway::http_request("127.0.0.1", port_, "GET", "/",
                                 {{"Host", "nobody.test"}, {"Accept", "application/nostr+json"}});
  EXPECT_EQ(r.status, 404u);
  EXPECT_NE(r.body.find("nobody.test"), std::string::npos);
  gateway::ws_client c;
  EXPECT_FALSE(c.connect("127.0.0.1", port_, "nobody.test"));
  EXPECT_EQ(c.rejected_status(), 404u);
}

TEST_F(node_e2e, nip11_lists_real_limits_and_the_relay_key) {
  auto r = gateway::http_request("127.0.0.1", port_, "GET", "/",
                                 {{"Host", "alpha.test"}, {"Accept", "application/nostr+json"}});
  ASSERT_EQ(r.status, 200u) << r.body;
  auto d = parse(r.body);
  ASSERT_TRUE(d.IsObject()) << r.body;
  EXPECT_EQ(std::string(d["pubkey"].GetString()), node_->relay_pubkey());
  EXPECT_EQ(d["limitation"]["max_message_length"].GetInt(), 65536);
  EXPECT_TRUE(d["limitation"]["auth_required"].GetBool());
  EXPECT_EQ(r.header("Access-Control-Allow-Origin"), "*");
}

TEST_F(node_e2e, bad_input_gets_clear_errors_and_the_connection_keeps_serving) {
  auto a = login("alpha.test", alice);
  auto expect_reply = [&](const std::string& frame, const std::string& needle) {
    a->send_text(frame);
    auto f = a->read_text(5s);
    ASSERT_TRUE(f.has_value()) << frame.substr(0, 200);
    EXPECT_NE(f->find(needle), std::string::npos) << frame.substr(0, 200) << " -> " << f->substr(0, 200);
  };
  expect_reply("not json", "invalid:");
  expect_reply("[]", "invalid:");
  expect_reply(R"(["EVENT"])", "invalid:");
  expect_reply(R"(["REQ","s"])", "invalid:");
  auto ev = signed_event(alice, 1, "x'); DROP TABLE events; --");
  auto wrong_id = ev.raw;
  wrong_id.replace(wrong_id.find(ev.id), 64, std::string(64, 'a'));
  expect_reply("[\"EVENT\"," + wrong_id + "]", "invalid: event id does not match");
  auto bad_sig = ev.raw;
  auto pos = bad_sig.find("\"sig\":\"") + 7;
  bad_sig[pos] = bad_sig[pos] == '0' ? '1' : '0';
  expect_reply("[\"EVENT\"," + bad_sig + "]", "invalid: bad signature");
  proto::event old_event = signed_event(alice, 1, "old");
  old_event.created_at -= 3600;
  proto::sign(old_event, alice);
  expect_reply("[\"EVENT\"," + old_event.raw + "]", "invalid: created_at");
  expect_reply(R"(["REQ",")" + std::string(100, 's') + R"(",{}])", "invalid:");
  // An absurd limit is clamped, not refused: the history ends with EOSE.
  auto seed = signed_event(alice, 1, "so the history is not empty");
  EXPECT_EQ(publish(*a, seed), proto::render_ok(seed.id, true, ""));
  auto big = history(*a, "big", R"({"limit":100000000})");
  ASSERT_FALSE(big.empty());
  EXPECT_NE(big.back(), "(timeout)");
  EXPECT_LE(big.size(), 500u);
  a->send_text(R"(["CLOSE","big"])");
  // More values than a filter may hold (600 > 500; still under the frame limit).
  std::string many = R"(["REQ","many",{"authors":[)";
  for (int i = 0; i < 600; ++i)
    many += std::string(i ? "," : "") + "\"" + std::string(64, 'a') + "\"";
  many += "]}]";
  expect_reply(many, "invalid:");
  // SQL-looking content is stored as data.
  EXPECT_EQ(publish(*a, ev), proto::render_ok(ev.id, true, ""));
  EXPECT_EQ(history(*a, "sql", R"({"ids":[")" + ev.id + R"("]})"), std::vector<std::string>{ev.id});
}

TEST_F(node_e2e, oversized_frames_close_with_1009_and_store_nothing) {
  auto a = login("alpha.test", alice);
  auto big = signed_event(alice, 1, std::string(70 * 1024, 'x'));
  a->send_text("[\"EVENT\"," + big.raw + "]");
  while (a->read_text(5s)) {
  }
  EXPECT_FALSE(a->is_open());
  EXPECT_EQ(a->close_code(), 1009);
  auto b = login("alpha.test", bob);
  EXPECT_EQ(history(*b, "big", R"({"ids":[")" + big.id + R"("]})"), std::vector<std::string>{});
}

TEST_F(node_e2e, post_events_uses_nip98_and_the_same_ingest_path) {
  auto ev = signed_event(bob, 1, "over http");
  std::string url = "http://alpha.test/events";
  auto r = post_event("alpha.test", bob, ev);
  ASSERT_EQ(r.status, 200u) << r.body;
  auto d = parse(r.body);
  EXPECT_TRUE(d["accepted"].GetBool()) << r.body;
  EXPECT_EQ(std::string(d["id"].GetString()), ev.id);
  auto a = login("alpha.test", alice);
  EXPECT_EQ(history(*a, "http", R"({"ids":[")" + ev.id + R"("]})"), std::vector<std::string>{ev.id});
  // Someone else's event under bob's authorization is refused.
  auto alices = signed_event(alice, 1, "not bob");
  auto r2 = gateway::http_request("127.0.0.1", port_, "POST", "/events",
                                  {{"Host", "alpha.test"}, {"Authorization", "Nostr " + base64(signed_event(bob, 27235, "", {{"u", url}, {"method", "POST"}, {"payload", proto::sha256_hex(alices.raw)}}).raw)}},
                                  alices.raw);
  EXPECT_NE(r2.body.find("restricted:"), std::string::npos) << r2.status << " " << r2.body;
}

TEST_F(node_e2e, health_readiness_and_metrics) {
  EXPECT_EQ(gateway::http_request("127.0.0.1", port_, "GET", "/healthz").status, 200u);
  EXPECT_EQ(gateway::http_request("127.0.0.1", port_, "GET", "/readyz").status, 200u);
  auto m = gateway::http_request("127.0.0.1", port_, "GET", "/metrics");
  EXPECT_EQ(m.status, 200u);
  for (auto name : {"waggle_connections", "waggle_events_accepted_total",
                    "waggle_events_rejected_total", "waggle_ingest_batch_size_bucket",
                    "waggle_commit_seconds_bucket", "waggle_live_subscriptions"})
    EXPECT_NE(m.body.find(name), std::string::npos) << name;
}

}  // namespace
