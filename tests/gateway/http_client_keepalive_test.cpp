// Kept connections of the outbound HTTP client (issue 33: a wake of an
// operator listener costs one write and one read, not a connect): reuse per
// origin, a connection the server closes or declines to keep is not reused,
// nor one with anything left to read (a stray answer, a final answer still
// owed), one that dies as the request goes out is replaced once and only
// then, TLS reuse skips the handshake, and the kept ones close with the
// client.

#include <gtest/gtest.h>

#include <thread>

#include "tests/gateway/http_test_server.hpp"

namespace {

using namespace waggle::gateway;
using namespace waggle::gateway::test_support;
using namespace std::chrono_literals;

constexpr bool keep_alive = true;

TEST(HttpClientKeepAlive, OneConnectionCarriesSuccessivePosts) {
  test_server srv(nullptr, keep_alive);
  auto client = make_http_client();
  for (int i = 0; i < 5; ++i) {
    auto out = post_and_wait(*client, post_to(srv.url("/ok")));
    ASSERT_TRUE(out);
    EXPECT_EQ(out->result.status, 200) << out->result.error;
  }
  EXPECT_EQ(srv.requests().size(), 5u);
  EXPECT_EQ(srv.connections(), 1u);
}

TEST(HttpClientKeepAlive, OriginsDoNotShareConnections) {
  test_server a(nullptr, keep_alive), b(nullptr, keep_alive);
  auto client = make_http_client();
  for (int i = 0; i < 3; ++i) {
    ASSERT_EQ(post_and_wait(*client, post_to(a.url("/ok")))->result.status, 200);
    ASSERT_EQ(post_and_wait(*client, post_to(b.url("/ok")))->result.status, 200);
  }
  EXPECT_EQ(a.connections(), 1u);
  EXPECT_EQ(b.connections(), 1u);
  EXPECT_EQ(a.requests().size(), 3u);
  EXPECT_EQ(b.requests().size(), 3u);
}

TEST(HttpClientKeepAlive, AnAnswerSayingCloseEndsTheConnection) {
  test_server srv(nullptr, keep_alive);
  auto client = make_http_client();
  ASSERT_EQ(post_and_wait(*client, post_to(srv.url("/close")))->result.status, 200);
  ASSERT_EQ(post_and_wait(*client, post_to(srv.url("/ok")))->result.status, 200);
  EXPECT_EQ(srv.connections(), 2u);
}

TEST(HttpClientKeepAlive, AServerThatKeepsNothingGetsANewConnectionEachTime) {
  test_server srv;  // answers with "Connection: close" and shuts its side
  auto client = make_http_client();
  for (int i = 0; i < 3; ++i)
    ASSERT_EQ(post_and_wait(*client, post_to(srv.url("/ok")))->result.status, 200);
  EXPECT_EQ(srv.connections(), 3u);
}

TEST(HttpClientKeepAlive, ACutShortBodyIsNotLeftOnAKeptConnection) {
  test_server srv(nullptr, keep_alive);
  auto client = make_http_client();
  // 1 MiB against a 64 KiB cap: the status stands, the rest of the body is
  // never read, so the connection cannot carry another exchange.
  EXPECT_EQ(post_and_wait(*client, post_to(srv.url("/big")))->result.status, 200);
  EXPECT_EQ(post_and_wait(*client, post_to(srv.url("/ok")))->result.status, 200);
  EXPECT_EQ(srv.connections(), 2u);
}

TEST(HttpClientKeepAlive, AKeptConnectionDroppedAsTheRequestGoesOutIsReplacedOnce) {
  test_server srv(nullptr, keep_alive);
  auto client = make_http_client();
  ASSERT_EQ(post_and_wait(*client, post_to(srv.url("/ok")))->result.status, 200);
  // The server closes the kept connection on reading this request, without
  // an answer; the client posts it again on a new connection, where it is
  // the first exchange and is answered.
  auto out = post_and_wait(*client, post_to(srv.url("/drop-kept")));
  ASSERT_TRUE(out);
  EXPECT_EQ(out->result.status, 200) << out->result.error;
  EXPECT_EQ(srv.connections(), 2u);
  auto seen = srv.requests();
  ASSERT_EQ(seen.size(), 3u);  // the dropped request reached the server too: at least once
  EXPECT_EQ(seen[1].target, "/drop-kept");
  EXPECT_EQ(seen[2].target, "/drop-kept");
}

TEST(HttpClientKeepAlive, AFreshConnectionThatDropsIsNotRetried) {
  test_server srv(nullptr, keep_alive);
  auto client = make_http_client();
  // /hang is held without an answer: the deadline ends it and nothing is
  // posted twice (only a kept connection is replaced).
  auto out = post_and_wait(*client, post_to(srv.url("/hang"), 300ms));
  ASSERT_TRUE(out);
  EXPECT_EQ(out->result.error, "timeout");
  EXPECT_EQ(srv.requests().size(), 1u);
  EXPECT_EQ(srv.connections(), 1u);
}

// A second answer to one request must never be taken for the next
// request's (red team A1): over TLS it is read off the socket together with
// the first answer and held by TLS, where a peek cannot see it.
void a_second_answer_is_not_the_next_ones(test_server& srv, http_client& client) {
  ASSERT_EQ(post_and_wait(client, post_to(srv.url("/twice")))->result.status, 200);
  std::this_thread::sleep_for(100ms);  // the stray answer arrives (the server's thread)
  auto out = post_and_wait(client, post_to(srv.url("/status/201")));
  ASSERT_TRUE(out);
  EXPECT_EQ(out->result.status, 201) << out->result.error;
  EXPECT_EQ(srv.connections(), 2u);
}

TEST(HttpClientKeepAlive, AStrayAnswerIsNotTakenForTheNextRequests) {
  test_server srv(nullptr, keep_alive);
  auto client = make_http_client();
  a_second_answer_is_not_the_next_ones(srv, *client);
}

TEST(HttpClientKeepAlive, AStrayAnswerOverTlsIsNotTakenForTheNextRequests) {
  auto cert = make_cert("IP:127.0.0.1");
  auto ctx = server_context(cert);
  test_server srv(&ctx, keep_alive);
  auto client = make_http_client({cert.cert_pem});
  a_second_answer_is_not_the_next_ones(srv, *client);
}

TEST(HttpClientKeepAlive, AConnectionStillOwingAFinalAnswerIsNotKept) {
  test_server srv(nullptr, keep_alive);
  auto client = make_http_client();
  // Five 103s: past the client's four interim answers the fifth is reported
  // as it came (red team A2); the server's 500 is still to come on that
  // connection, which therefore carries nothing else.
  EXPECT_EQ(post_and_wait(*client, post_to(srv.url("/hints")))->result.status, 103);
  auto out = post_and_wait(*client, post_to(srv.url("/status/202")));
  ASSERT_TRUE(out);
  EXPECT_EQ(out->result.status, 202) << out->result.error;
  EXPECT_EQ(srv.connections(), 2u);
}

TEST(HttpClientKeepAlive, NoRetryOnceAnyAnswerArrived) {
  test_server srv(nullptr, keep_alive);
  auto client = make_http_client();
  ASSERT_EQ(post_and_wait(*client, post_to(srv.url("/ok")))->result.status, 200);
  // A 100 and then the end (red team A3): the listener answered something,
  // so the request is not posted again.
  auto out = post_and_wait(*client, post_to(srv.url("/continue-then-drop")));
  ASSERT_TRUE(out);
  EXPECT_EQ(out->result.status, 0);
  EXPECT_EQ(out->result.error.rfind("read: ", 0), 0u) << out->result.error;
  EXPECT_EQ(srv.requests().size(), 2u);
  EXPECT_EQ(srv.connections(), 1u);
}

TEST(HttpClientKeepAlive, KeptConnectionsCloseWithTheClient) {
  test_server srv(nullptr, keep_alive);
  auto client = make_http_client();
  ASSERT_EQ(post_and_wait(*client, post_to(srv.url("/ok")))->result.status, 200);
  client.reset();
  for (int i = 0; i < 500 && srv.closed_by_client() == 0; ++i)
    std::this_thread::sleep_for(10ms);  // the server's own io thread: no coordinator to step
  EXPECT_EQ(srv.closed_by_client(), 1u);
}

TEST(HttpClientKeepAlive, TlsConnectionsAreKeptAndSkipTheHandshake) {
  auto cert = make_cert("IP:127.0.0.1");
  auto ctx = server_context(cert);
  test_server srv(&ctx, keep_alive);
  auto client = make_http_client({cert.cert_pem});
  for (int i = 0; i < 3; ++i) {
    auto out = post_and_wait(*client, post_to(srv.url("/status/202")));
    ASSERT_TRUE(out);
    EXPECT_EQ(out->result.status, 202) << out->result.error;
  }
  EXPECT_EQ(srv.connections(), 1u);
}

}  // namespace
