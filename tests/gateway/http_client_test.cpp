// The outbound HTTP client (issue 14, operator listeners) against a small
// Beast server on 127.0.0.1 (http_test_server.hpp): statuses, redirects not
// followed, the deadline, caps, many exchanges at once, URLs, and https with
// certificates made here (untrusted, trusted, trusted for another name). The
// stop and the drops: http_client_lifetime_test.cpp.

#include <gtest/gtest.h>

#include <atomic>
#include <future>
#include <mutex>
#include <thread>

#include "tests/gateway/http_test_server.hpp"

namespace {

using namespace waggle::gateway;
using namespace waggle::gateway::test_support;
using namespace std::chrono_literals;
namespace net = boost::asio;
namespace ssl = net::ssl;

TEST(HttpClient, StatusesComeBackOnTheClientThread) {
  test_server srv;
  auto client = make_http_client();
  for (unsigned code : {200u, 204u, 500u, 404u}) {
    auto out = post_and_wait(*client, post_to(srv.url("/status/" + std::to_string(code))));
    ASSERT_TRUE(out) << code;
    EXPECT_EQ(out->result.status, code);
    EXPECT_EQ(out->result.error, "");
    EXPECT_EQ(out->result.location, "");
    EXPECT_NE(out->thread, std::this_thread::get_id());
  }
}

// A name goes through gateway::name_resolver (here /etc/hosts' localhost,
// which may list ::1 before 127.0.0.1: each address is tried in turn).
TEST(HttpClient, ANameIsResolvedAndConnected) {
  test_server srv;
  auto client = make_http_client();
  auto url = srv.url("/status/204");
  url.replace(url.find("127.0.0.1"), 9, "localhost");
  for (int i = 0; i < 2; ++i) {  // the second from the kept answer (or the kept connection)
    auto out = post_and_wait(*client, post_to(url));
    ASSERT_TRUE(out);
    EXPECT_EQ(out->result.status, 204) << out->result.error;
  }
}

TEST(HttpClient, RedirectIsReportedNotFollowed) {
  test_server srv;
  auto client = make_http_client();
  auto out = post_and_wait(*client, post_to(srv.url("/status/302")));
  ASSERT_TRUE(out);
  EXPECT_EQ(out->result.status, 302);
  EXPECT_EQ(out->result.location, srv.url("/ok"));
  EXPECT_EQ(srv.requests().size(), 1u);
}

TEST(HttpClient, RequestArrivesIntact) {
  test_server srv;
  auto client = make_http_client();
  auto p = post_to(srv.url("/ok?listener=1"));
  p.headers = {{"Authorization", "Nostr eyJraW5kIjoyNzIzNX0="}, {"X-Waggle-Delivery", "7"}};
  p.body = std::string(100000, 'b') + "\"end\"";
  p.content_type = "application/nostr+json";
  auto out = post_and_wait(*client, p);
  ASSERT_TRUE(out);
  EXPECT_EQ(out->result.status, 200);
  auto seen = srv.requests();
  ASSERT_EQ(seen.size(), 1u);
  auto& r = seen[0];
  EXPECT_EQ(r.method, "POST");
  EXPECT_EQ(r.target, "/ok?listener=1");
  EXPECT_EQ(r.body, p.body);
  EXPECT_EQ(r.header("Host"), "127.0.0.1:" + std::to_string(srv.port()));
  EXPECT_EQ(r.header("User-Agent"), "waggle");
  EXPECT_EQ(r.header("Content-Type"), "application/nostr+json");
  EXPECT_EQ(r.header("Content-Length"), std::to_string(p.body.size()));
  EXPECT_EQ(r.header("Authorization"), "Nostr eyJraW5kIjoyNzIzNX0=");
  EXPECT_EQ(r.header("X-Waggle-Delivery"), "7");
}

TEST(HttpClient, HeadersThatWouldSplitTheRequestAreRefused) {
  test_server srv;
  auto client = make_http_client();
  for (auto [name, value] : std::vector<std::pair<std::string, std::string>>{
         {"X-Evil", "a\r\nX-Injected: 1"}, {"Bad Name", "v"}, {"Content-Length", "1"}, {"Host", "x"}}) {
    auto p = post_to(srv.url("/ok"));
    p.headers = {{name, value}};
    auto out = post_and_wait(*client, p);
    ASSERT_TRUE(out);
    EXPECT_EQ(out->result.status, 0) << name;
    EXPECT_EQ(out->result.error, "bad header") << name;
  }
  EXPECT_TRUE(srv.requests().empty());
}

TEST(HttpClient, SilentServerTimesOut) {
  test_server srv;
  auto client = make_http_client();
  auto start = std::chrono::steady_clock::now();
  auto out = post_and_wait(*client, post_to(srv.url("/hang"), 300ms));
  auto took = std::chrono::steady_clock::now() - start;
  ASSERT_TRUE(out);
  EXPECT_EQ(out->result.status, 0);
  EXPECT_EQ(out->result.error, "timeout");
  EXPECT_GE(took, 300ms);
  EXPECT_LT(took, 3s);
}

TEST(HttpClient, RefusedConnection) {
  uint16_t port;
  {
    net::io_context ioc;
    tcp::acceptor a(ioc, {net::ip::make_address("127.0.0.1"), 0});
    port = a.local_endpoint().port();
  }  // closed: nothing listens there now
  auto client = make_http_client();
  auto out = post_and_wait(*client, post_to("http://127.0.0.1:" + std::to_string(port) + "/"));
  ASSERT_TRUE(out);
  EXPECT_EQ(out->result.status, 0);
  EXPECT_EQ(out->result.error.rfind("connect: ", 0), 0u) << out->result.error;
}

TEST(HttpClient, BadUrlFailsWithoutTouchingTheNetwork) {
  auto client = make_http_client();
  auto out = post_and_wait(*client, post_to("ftp://127.0.0.1/"));
  ASSERT_TRUE(out);
  EXPECT_EQ(out->result.status, 0);
  EXPECT_EQ(out->result.error.rfind("bad url: ", 0), 0u) << out->result.error;
}

TEST(HttpClient, LargeBodyIsCutButTheStatusStands) {
  test_server srv;
  auto client = make_http_client();
  auto out = post_and_wait(*client, post_to(srv.url("/big")));
  ASSERT_TRUE(out);
  EXPECT_EQ(out->result.status, 200);
  EXPECT_EQ(out->result.error, "");
}

TEST(HttpClient, EndlessBodyIsCutAtTheCap) {
  test_server srv;
  auto client = make_http_client();
  auto out = post_and_wait(*client, post_to(srv.url("/endless"), 3000ms));
  ASSERT_TRUE(out);
  EXPECT_EQ(out->result.status, 200);
  EXPECT_EQ(out->result.error, "");  // not "timeout": reading stopped at the cap
}

TEST(HttpClient, LargeHeaderIsRefused) {
  test_server srv;
  auto client = make_http_client();
  auto out = post_and_wait(*client, post_to(srv.url("/bigheader")));
  ASSERT_TRUE(out);
  EXPECT_EQ(out->result.status, 0);
  EXPECT_EQ(out->result.error.rfind("read: ", 0), 0u) << out->result.error;
}

TEST(HttpClient, ManyConcurrentPostsFromManyThreadsAllComplete) {
  test_server srv;
  auto client = make_http_client();
  constexpr int threads = 5, each = 10;
  std::atomic<int> calls{0}, ok{0};
  std::promise<void> all;
  std::vector<std::thread> posters;
  for (int t = 0; t < threads; ++t)
    posters.emplace_back([&] {
      for (int i = 0; i < each; ++i)
        client->post(post_to(srv.url("/ok")), [&](http_result r) {
          if (r.status == 200)
            ++ok;
          if (++calls == threads * each)
            all.set_value();
        });
    });
  for (auto& t : posters)
    t.join();
  ASSERT_EQ(all.get_future().wait_for(20s), std::future_status::ready);
  EXPECT_EQ(ok.load(), threads * each);
  EXPECT_EQ(srv.requests().size(), std::size_t(threads * each));
  client.reset();  // no second call arrives on the way out
  EXPECT_EQ(calls.load(), threads * each);
}

TEST(HttpUrl, Accepted) {
  auto u = parse_http_url("http://example.com");
  ASSERT_TRUE(u);
  EXPECT_FALSE(u->tls);
  EXPECT_EQ(u->host, "example.com");
  EXPECT_EQ(u->port, 80);
  EXPECT_EQ(u->target, "/");

  u = parse_http_url("HTTPS://Hooks.Example.com:8443/nostr/in?x=1&y=%20");
  ASSERT_TRUE(u);
  EXPECT_TRUE(u->tls);
  EXPECT_EQ(u->host, "Hooks.Example.com");
  EXPECT_EQ(u->port, 8443);
  EXPECT_EQ(u->target, "/nostr/in?x=1&y=%20");

  u = parse_http_url("https://[2001:db8::1]/p");
  ASSERT_TRUE(u);
  EXPECT_EQ(u->host, "2001:db8::1");
  EXPECT_EQ(u->port, 443);
  EXPECT_EQ(u->target, "/p");

  u = parse_http_url("http://[::1]:65535?q");
  ASSERT_TRUE(u);
  EXPECT_EQ(u->host, "::1");
  EXPECT_EQ(u->port, 65535);
  EXPECT_EQ(u->target, "/?q");

  u = parse_http_url("http://127.0.0.1:1/a@b");  // '@' in the path is no userinfo
  ASSERT_TRUE(u);
  EXPECT_EQ(u->port, 1);
  EXPECT_EQ(u->target, "/a@b");
}

TEST(HttpUrl, Refused) {
  for (auto bad : {"", "example.com", "ftp://example.com/", "ws://example.com/", "http:/example.com",
                   "http://", "http:///path", "http://:80/", "http://example.com:/",
                   "http://example.com:0/", "http://example.com:65536/", "http://example.com:99999/",
                   "http://example.com:123456/", "http://example.com:8a/", "http://example.com:-1/",
                   "http://user@example.com/", "http://user:pw@example.com/", "http://example.com/#frag",
                   "http://example.com/a b", "http://exa mple.com/", "http://example.com/\r\nX: 1",
                   "http://example.com/\t", "http://example.com\\@evil.com/", "http://[::1/",
                   "http://[::1]x/", "http://[not-v6]/", "http://[fe80::1%25eth0]/", "http://::1/",
                   "http://ex_ample.com:80:80/", "http://exämple.com/", " http://example.com/"})
    EXPECT_FALSE(parse_http_url(bad)) << bad;
}

TEST(HttpClientTls, UntrustedCertificateIsRefused) {
  auto cert = make_cert("IP:127.0.0.1");
  auto ctx = server_context(cert);
  test_server srv(&ctx);
  auto client = make_http_client();
  auto out = post_and_wait(*client, post_to(srv.url("/ok")));
  ASSERT_TRUE(out);
  EXPECT_EQ(out->result.status, 0);
  EXPECT_EQ(out->result.error.rfind("tls: ", 0), 0u) << out->result.error;
  EXPECT_TRUE(srv.requests().empty());
}

TEST(HttpClientTls, TrustedCertificateCarriesTheExchange) {
  auto cert = make_cert("IP:127.0.0.1");
  auto ctx = server_context(cert);
  test_server srv(&ctx);
  auto client = make_http_client({cert.cert_pem});
  auto out = post_and_wait(*client, post_to(srv.url("/status/202")));
  ASSERT_TRUE(out);
  EXPECT_EQ(out->result.status, 202) << out->result.error;
  ASSERT_EQ(srv.requests().size(), 1u);
  EXPECT_EQ(srv.requests()[0].body, R"({"kind":1})");
}

TEST(HttpClientTls, CertificateForAnotherNameIsRefused) {
  auto cert = make_cert("DNS:other.example");
  auto ctx = server_context(cert);
  test_server srv(&ctx);
  auto client = make_http_client({cert.cert_pem});
  auto out = post_and_wait(*client, post_to(srv.url("/ok")));
  ASSERT_TRUE(out);
  EXPECT_EQ(out->result.status, 0);
  EXPECT_EQ(out->result.error.rfind("tls: ", 0), 0u) << out->result.error;
  EXPECT_TRUE(srv.requests().empty());
}

}  // namespace
