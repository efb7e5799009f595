// The gateway's HTTP side against a fake node (gateway_fixture.hpp): community
// hosts, NIP-11 and CORS, health, readiness and metrics, malformed requests,
// and POST /events with NIP-98 authorization.

#include <ctime>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tests/gateway/gateway_fixture.hpp"

using namespace std::chrono_literals;
using namespace waggle;
using namespace waggle::gateway;
using namespace waggle::gateway::test_support;
using waggle::proto::base64_decode;
using waggle::proto::base64_encode;
using waggle::proto::sha256_hex;

namespace {

constexpr const char* secret = "b7e151628aed2a6abf7158809cf4f3c762e7160f38b4da56a784d9045190cfef";

TEST_F(GatewayTest, UnknownHostIs404ForEveryPathAndTheUpgrade) {
  start();
  for (auto target : {"/", "/events", "/nope"}) {
    auto r = get(target, {{"Host", "nope.test"}});
    EXPECT_EQ(r.status, 404u) << target;
    EXPECT_EQ(r.body, "unknown community host: nope.test\n");
  }
  ws_client c;
  EXPECT_FALSE(c.connect("127.0.0.1", port, "nope.test:1234"));
  EXPECT_EQ(c.rejected_status(), 404u);
  EXPECT_EQ(node.opened.load(), 0);
}

TEST_F(GatewayTest, HostMatchingIsCaseInsensitiveAndIgnoresThePort) {
  start();
  auto r = get("/", {{"Host", "RELAY.Test:9999"}, {"Accept", "application/nostr+json"}});
  EXPECT_EQ(r.status, 200u);
}

TEST_F(GatewayTest, Nip11WithCors) {
  start();
  auto r = get("/", {{"Accept", "application/nostr+json"}});
  EXPECT_EQ(r.status, 200u);
  EXPECT_EQ(r.body, nip11_doc);
  EXPECT_EQ(r.header("Content-Type"), "application/nostr+json");
  EXPECT_EQ(r.header("Access-Control-Allow-Origin"), "*");
  EXPECT_NE(r.header("Access-Control-Allow-Headers"), "");
  EXPECT_NE(r.header("Access-Control-Allow-Methods"), "");

  auto pre = http_request("127.0.0.1", port, "OPTIONS", "/",
                          {{"Host", host_header()}, {"Origin", "https://app.example"},
                           {"Access-Control-Request-Method", "GET"}});
  EXPECT_EQ(pre.status, 204u);
  EXPECT_EQ(pre.header("Access-Control-Allow-Origin"), "*");

  auto plain = get("/");
  EXPECT_EQ(plain.status, 200u);
  EXPECT_NE(plain.body.find("Nostr"), std::string::npos);

  auto bad = http_request("127.0.0.1", port, "DELETE", "/", {{"Host", host_header()}});
  EXPECT_EQ(bad.status, 405u);
  EXPECT_EQ(get("/nope").status, 404u);
}

TEST_F(GatewayTest, HealthReadinessAndMetrics) {
  start();
  auto h = get("/healthz", {{"Host", "10.0.0.1:8080"}});
  EXPECT_EQ(h.status, 200u);
  EXPECT_EQ(h.body, "ok\n");
  auto rd = get("/readyz", {{"Host", "10.0.0.1:8080"}});
  EXPECT_EQ(rd.status, 200u);
  EXPECT_EQ(rd.body, "ready\n");
  node.ready = false;
  EXPECT_EQ(get("/readyz").status, 503u);
  auto m = get("/metrics", {{"Host", "10.0.0.1"}});
  EXPECT_EQ(m.status, 200u);
  EXPECT_NE(m.header("Content-Type").find("version=0.0.4"), std::string::npos);
  EXPECT_NE(m.body.find("waggle_connections"), std::string::npos);
}

TEST_F(GatewayTest, GarbageInputNeverCrashes) {
  start();
  auto r1 = raw_exchange(port, "GARBAGE\r\n\r\n");
  EXPECT_EQ(r1.rfind("HTTP/1.1 400", 0), 0u) << r1;
  auto r2 = raw_exchange(port, "GET / HTTP/1.1\r\nHost: relay.test\r\nX-Big: "
                                 + std::string(20000, 'a') + "\r\n\r\n");
  EXPECT_EQ(r2.rfind("HTTP/1.1 431", 0), 0u) << r2.substr(0, 100);
  std::string junk;
  for (int i = 0; i < 5000; ++i)
    junk += static_cast<char>((i * 7919) & 0xff);
  raw_exchange(port, junk);
  auto r3 = raw_exchange(port, "GET / HTTP/1.1\r\nHost: relay.test\r\nContent-Length: -5\r\n\r\n");
  EXPECT_EQ(r3.rfind("HTTP/1.1 400", 0), 0u) << r3;
  // Missing Host on a community path.
  auto r4 = raw_exchange(port, "GET / HTTP/1.0\r\n\r\n");
  EXPECT_EQ(r4.rfind("HTTP/1.0 400", 0), 0u) << r4;
  // Keep-alive: two requests on one connection.
  auto r5 = raw_exchange(port,
                         "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"
                         "GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
  size_t first = r5.find("HTTP/1.1 200");
  EXPECT_NE(first, std::string::npos);
  EXPECT_NE(r5.find("HTTP/1.1 200", first + 1), std::string::npos);
  EXPECT_EQ(get("/healthz").status, 200u);
}

// -- POST /events (NIP-98) ---------------------------------------------------

std::string signed_event(int32_t kind, int64_t created_at, std::vector<proto::tag> tags,
                         std::string content = "hello") {
  proto::event ev;
  ev.kind = kind;
  ev.created_at = created_at;
  ev.tags = std::move(tags);
  ev.content = std::move(content);
  proto::sign(ev, secret);
  return ev.raw;
}

std::string auth_header(const std::string& event_json) {
  return "Nostr " + base64_encode(event_json);
}

class Nip98Test : public GatewayTest {
 protected:
  void SetUp() override {
    start();
    now = static_cast<int64_t>(std::time(nullptr));
    url = "http://" + host_header() + "/events";
    body = signed_event(1, now, {}, "a note");
  }
  std::string auth(std::vector<proto::tag> tags, int32_t kind = 27235, int64_t at = 0) {
    return auth_header(signed_event(kind, at ? at : now, std::move(tags), ""));
  }
  http_response post(std::optional<std::string> authorization, const std::string& b) {
    header_list h{{"Host", host_header()}, {"Content-Type", "application/json"}};
    if (authorization)
      h.emplace_back("Authorization", *authorization);
    return http_request("127.0.0.1", port, "POST", "/events", h, b);
  }
  // `what` must appear in the message: each rejection is for its own reason.
  void expect_401(const http_response& r, std::string_view what) {
    EXPECT_EQ(r.status, 401u) << what << ": " << r.body;
    EXPECT_NE(r.body.find(what), std::string::npos) << what << ": " << r.body;
    EXPECT_EQ(r.header("WWW-Authenticate"), "Nostr");
    EXPECT_NE(r.body.find(R"("accepted":false)"), std::string::npos) << what;
    EXPECT_NE(r.body.find(R"("message":"auth-required: )"), std::string::npos) << what << r.body;
    std::lock_guard lock{node.mtx};
    EXPECT_TRUE(node.submits.empty()) << what;
  }
  int64_t now = 0;
  std::string url;
  std::string body;
};

TEST_F(Nip98Test, Accepted) {
  auto r = post(auth({{"u", url}, {"method", "POST"}, {"payload", sha256_hex(body)}}), body);
  EXPECT_EQ(r.status, 200u) << r.body;
  auto ev = proto::parse_event(body);
  ASSERT_TRUE(ev);
  EXPECT_EQ(r.body, R"({"id":")" + ev->id + R"(","accepted":true,"message":""})");
  EXPECT_EQ(r.header("Access-Control-Allow-Origin"), "*");
  std::lock_guard lock{node.mtx};
  ASSERT_EQ(node.submits.size(), 1u);
  EXPECT_EQ(node.submits[0].first, body);
  EXPECT_EQ(node.submits[0].second, proto::pubkey_of(secret));
}

TEST_F(Nip98Test, HttpsUrlAccepted) {
  auto r = post(auth({{"u", "https://" + host_header() + "/events"}, {"method", "POST"},
                      {"payload", sha256_hex(body)}}),
                body);
  EXPECT_EQ(r.status, 200u) << r.body;
}

// Issue 13, finding 8: a token without `payload` does not bind the body, so
// anyone who saw it could post another body under the same key for 60 s.
// Red check: on the base code this request was accepted (200).
TEST_F(Nip98Test, MissingPayloadTagOnABodyIsRefused) {
  expect_401(post(auth({{"u", url}, {"method", "POST"}}), body), "no payload tag");
}

TEST_F(Nip98Test, NodeRejectionsMapToStatuses) {
  auto restricted = signed_event(1, now, {}, "please-restrict");
  auto r = post(auth({{"u", url}, {"method", "POST"}, {"payload", sha256_hex(restricted)}}),
                restricted);
  EXPECT_EQ(r.status, 403u) << r.body;
  EXPECT_NE(r.body.find(R"("message":"restricted: not a member")"), std::string::npos);
  const std::string not_event = "{\"not\":\"an event\"}";
  auto bad = post(auth({{"u", url}, {"method", "POST"}, {"payload", sha256_hex(not_event)}}),
                  not_event);
  EXPECT_EQ(bad.status, 400u) << bad.body;
  EXPECT_NE(bad.body.find("invalid: "), std::string::npos);
}

TEST_F(Nip98Test, MissingHeader) { expect_401(post(std::nullopt, body), "missing Authorization header"); }

TEST_F(Nip98Test, BadBase64) { expect_401(post("Nostr !!!not-base64!!!", body), "not valid base64"); }

TEST_F(Nip98Test, WrongScheme) {
  expect_401(post("Bearer " + base64_encode(body), body), "scheme must be Nostr");
}

TEST_F(Nip98Test, NotAnEvent) { expect_401(post(auth_header("{\"x\":1}"), body), "Authorization event is invalid"); }

TEST_F(Nip98Test, WrongKind) {
  expect_401(post(auth({{"u", url}, {"method", "POST"}}, 1), body), "must be kind 27235");
}

TEST_F(Nip98Test, StaleCreatedAt) {
  expect_401(post(auth({{"u", url}, {"method", "POST"}}, 27235, now - 120), body), "not within 60 seconds");
  expect_401(post(auth({{"u", url}, {"method", "POST"}}, 27235, now + 120), body), "not within 60 seconds");
}

TEST_F(Nip98Test, WrongUrl) {
  expect_401(post(auth({{"u", "http://" + host_header() + "/other"}, {"method", "POST"}}), body),
             "u tag does not match");
  expect_401(post(auth({{"u", "http://evil.test/events"}, {"method", "POST"}}), body),
             "u tag does not match");
  expect_401(post(auth({{"method", "POST"}}), body), "no u tag");
}

TEST_F(Nip98Test, WrongMethod) {
  expect_401(post(auth({{"u", url}, {"method", "GET"}}), body), "method tag must be POST");
  expect_401(post(auth({{"u", url}}), body), "no method tag");
}

TEST_F(Nip98Test, BadPayloadHash) {
  expect_401(post(auth({{"u", url}, {"method", "POST"}, {"payload", sha256_hex("other")}}), body),
             "payload tag does not match");
}

TEST_F(Nip98Test, BadSignature) {
  auto json = signed_event(27235, now, {{"u", url}, {"method", "POST"}, {"payload", sha256_hex(body)}},
                           "");
  auto pos = json.find("\"sig\":\"") + 7;
  json[pos] = json[pos] == '0' ? '1' : '0';
  expect_401(post(auth_header(json), body), "signature is invalid");
}

TEST_F(Nip98Test, BodyTooLarge) {
  auto big = std::string(70 * 1024, 'x');
  auto r = post(auth({{"u", url}, {"method", "POST"}}), big);
  EXPECT_EQ(r.status, 413u) << r.body;
}

TEST(Nip98Unit, Base64RoundTrip) {
  for (std::string s : {"", "f", "fo", "foo", "foob", "fooba", "foobar"}) {
    auto e = base64_encode(s);
    auto d = base64_decode(e);
    ASSERT_TRUE(d) << e;
    EXPECT_EQ(*d, s);
  }
  EXPECT_EQ(base64_encode("foobar"), "Zm9vYmFy");
  EXPECT_EQ(*base64_decode("Zm9vYg"), "foob");  // padding optional
  EXPECT_FALSE(base64_decode("Zm9v YmFy"));
  EXPECT_FALSE(base64_decode("Z"));
  EXPECT_FALSE(base64_decode("Zm9=v"));
}

}  // namespace
