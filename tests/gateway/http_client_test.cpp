// The outbound HTTP client (issue 14, operator listeners) against a small
// Beast server on 127.0.0.1: statuses, redirects not followed, the deadline,
// caps, many exchanges at once, the stop, and https with certificates made
// here (untrusted, trusted, trusted for another name).

#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <future>
#include <mutex>
#include <thread>

#include <unistd.h>

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <openssl/pem.h>
#include <openssl/x509v3.h>

#include "gateway/http_client.hpp"

namespace {

using namespace waggle::gateway;
using namespace std::chrono_literals;
namespace beast = boost::beast;
namespace http = beast::http;
namespace net = boost::asio;
namespace ssl = net::ssl;
using tcp = net::ip::tcp;

struct seen_request {
  std::string method, target, body;
  std::vector<std::pair<std::string, std::string>> headers;
  std::string header(std::string_view name) const {
    for (auto& [k, v] : headers)
      if (beast::iequals(k, name))
        return v;
    return {};
  }
};

// Answers by target: /hang never answers, /status/N answers N (a 3xx points
// back at /ok), /big sends 1 MiB, /endless a body that never ends, /bigheader a 64 KiB header (16 fields), anything else 200.
class test_server {
 public:
  explicit test_server(ssl::context* tls = nullptr) : tls_(tls) {
    tcp::endpoint ep{net::ip::make_address("127.0.0.1"), 0};
    acceptor_.open(ep.protocol());
    acceptor_.set_option(tcp::acceptor::reuse_address(true));
    acceptor_.bind(ep);
    acceptor_.listen();
    port_ = acceptor_.local_endpoint().port();
    accept();
    thread_ = std::thread([this] { ioc_.run(); });
  }
  ~test_server() {
    ioc_.stop();
    thread_.join();
  }
  uint16_t port() const { return port_; }
  std::string url(std::string_view target) const {
    return std::string(tls_ ? "https" : "http") + "://127.0.0.1:" + std::to_string(port_) +
           std::string(target);
  }
  std::vector<seen_request> requests() {
    std::lock_guard lock(m_);
    return seen_;
  }
  bool wait_for_requests(std::size_t n, std::chrono::milliseconds bound) {
    std::unique_lock lock(m_);
    return cv_.wait_for(lock, bound, [&] { return seen_.size() >= n; });
  }

 private:
  template <class Stream>
  struct session : std::enable_shared_from_this<session<Stream>> {
    session(test_server& s, Stream st) : srv(s), stream(std::move(st)) {}
    test_server& srv;
    Stream stream;
    beast::flat_buffer buffer;
    http::request<http::string_body> req;
    http::response<http::string_body> res;

    void read() {
      http::async_read(stream, buffer, req, [self = this->shared_from_this()](beast::error_code ec, std::size_t) {
        if (!ec)
          self->answer();
      });
    }
    void answer() {
      seen_request r{std::string(req.method_string()), std::string(req.target()), req.body(), {}};
      for (auto& f : req)
        r.headers.emplace_back(std::string(f.name_string()), std::string(f.value()));
      {
        std::lock_guard lock(srv.m_);
        srv.seen_.push_back(std::move(r));
      }
      srv.cv_.notify_all();
      std::string target(req.target());
      if (target == "/endless") {
        auto head = std::make_shared<std::string>("HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n");
        net::async_write(stream, net::buffer(*head), [self = this->shared_from_this(), head](beast::error_code ec, std::size_t) {
          if (!ec)
            self->stream_forever();
        });
        return;
      }
      if (target == "/hang") {
        srv.held_.push_back(this->shared_from_this());  // io thread only
        return;
      }
      res.version(11);
      res.result(http::status::ok);
      res.body() = "ok";
      if (target.rfind("/status/", 0) == 0) {
        unsigned code = std::stoul(target.substr(8));
        res.result(code);
        if (code == 204 || code == 304)
          res.body().clear();  // these carry no body
        if (code >= 300 && code < 400)
          res.set(http::field::location, "http://127.0.0.1:" + std::to_string(srv.port_) + "/ok");
      } else if (target == "/big") {
        res.body() = std::string(1 << 20, 'x');
      } else if (target == "/bigheader") {
        for (int i = 0; i < 16; ++i)  // one field may not exceed 64 KiB in Beast
          res.insert("x-pad-" + std::to_string(i), std::string(4096, 'p'));
      }
      res.prepare_payload();
      http::async_write(stream, res, [self = this->shared_from_this()](beast::error_code, std::size_t) {
        beast::error_code ignored;
        beast::get_lowest_layer(self->stream).shutdown(tcp::socket::shutdown_send, ignored);
      });
    }
    // A body without end (no length, until close): only the client's cap ends it.
    void stream_forever() {
      res.body() = std::string(16 * 1024, 'x');
      net::async_write(stream, net::buffer(res.body()), [self = this->shared_from_this()](beast::error_code ec, std::size_t) {
        if (!ec)
          self->stream_forever();
      });
    }
  };

  void accept() {
    acceptor_.async_accept([this](beast::error_code ec, tcp::socket s) {
      if (ec)
        return;
      if (tls_) {
        auto x = std::make_shared<session<ssl::stream<tcp::socket>>>(
          *this, ssl::stream<tcp::socket>(std::move(s), *tls_));
        x->stream.async_handshake(ssl::stream_base::server, [x](beast::error_code ec) {
          if (!ec)
            x->read();
        });
      } else {
        std::make_shared<session<tcp::socket>>(*this, std::move(s))->read();
      }
      accept();
    });
  }

  ssl::context* tls_;
  net::io_context ioc_;
  tcp::acceptor acceptor_{ioc_};
  uint16_t port_ = 0;
  std::thread thread_;
  std::mutex m_;
  std::condition_variable cv_;
  std::vector<seen_request> seen_;
  std::vector<std::shared_ptr<void>> held_;
};

// One post, waited for with a generous bound; counts how often `done` ran.
struct outcome {
  http_result result;
  std::thread::id thread;
};
std::optional<outcome> post_and_wait(http_client& client, http_post p, std::chrono::seconds bound = 10s) {
  auto pr = std::make_shared<std::promise<outcome>>();
  auto fut = pr->get_future();
  client.post(std::move(p), [pr](http_result r) { pr->set_value({std::move(r), std::this_thread::get_id()}); });
  if (fut.wait_for(bound) != std::future_status::ready)
    return std::nullopt;
  return fut.get();
}

http_post post_to(std::string url, std::chrono::milliseconds timeout = 5000ms) {
  http_post p;
  p.url = std::move(url);
  p.body = R"({"kind":1})";
  p.timeout = timeout;
  return p;
}

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

TEST(HttpClient, DestroyingFailsExchangesInFlightOnce) {
  test_server srv;
  auto client = make_http_client();
  constexpr int n = 10;
  std::mutex m;
  std::vector<http_result> results;
  for (int i = 0; i < n; ++i)
    client->post(post_to(srv.url("/hang"), 30s), [&](http_result r) {
      std::lock_guard lock(m);
      results.push_back(std::move(r));
    });
  // Every exchange is past its write, waiting for an answer that never comes.
  ASSERT_TRUE(srv.wait_for_requests(n, 10s));
  auto start = std::chrono::steady_clock::now();
  client.reset();  // joins: every `done` has run by now
  EXPECT_LT(std::chrono::steady_clock::now() - start, 5s);
  std::lock_guard lock(m);
  ASSERT_EQ(results.size(), std::size_t(n));
  for (auto& r : results) {
    EXPECT_EQ(r.status, 0);
    EXPECT_EQ(r.error, "stopped");
  }
}

TEST(HttpClient, DroppingTheClientFromItsOwnCallbackDoesNotDeadlock) {
  test_server srv;
  auto holder = std::make_shared<std::shared_ptr<http_client>>(make_http_client());
  auto got = std::make_shared<std::promise<uint16_t>>();
  auto fut = got->get_future();
  auto* raw = holder->get();
  raw->post(post_to(srv.url("/ok")), [holder, got](http_result r) {
    holder->reset();  // the last reference: destroyed on its own io thread
    got->set_value(r.status);
  });
  holder.reset();
  ASSERT_EQ(fut.wait_for(10s), std::future_status::ready);
  EXPECT_EQ(fut.get(), 200);
}

// A client dropped from its own callback leaves its thread running after the
// drop; the process must not end under it (a detached thread still freeing
// its SSL context while exit() tore OpenSSL down crashed ~1 run in 150). In a
// child process: an exchange still in flight when the client is dropped gets
// "stopped", and its callback takes 200 ms; exit() must wait for it.
TEST(HttpClientDeathTest, ExitWaitsForTheThreadOfAClientDroppedFromItsOwnCallback) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  auto child = [] {
    {
      test_server srv;
      auto holder = std::make_shared<std::shared_ptr<http_client>>(make_http_client());
      auto* raw = holder->get();
      raw->post(post_to(srv.url("/hang"), 30s), [](http_result r) {
        std::this_thread::sleep_for(200ms);
        std::fprintf(stderr, "slow callback ended: %s\n", r.error.c_str());
      });
      if (!srv.wait_for_requests(1, 10s))
        std::_Exit(3);
      auto dropped = std::make_shared<std::promise<void>>();
      auto fut = dropped->get_future();
      raw->post(post_to(srv.url("/ok")), [holder, dropped](http_result) {
        holder->reset();
        dropped->set_value();
      });
      holder.reset();
      if (fut.wait_for(10s) != std::future_status::ready)
        std::_Exit(4);
    }
    std::exit(0);
  };
  EXPECT_EXIT(child(), ::testing::ExitedWithCode(0), "slow callback ended: ");
}

// exit() from inside the callback that dropped the client: the exit runs on
// the very thread the reaper holds, which must not wait for itself (a join
// there aborted with "Resource deadlock avoided").
TEST(HttpClientDeathTest, ExitFromTheCallbackThatDroppedTheClient) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  auto child = [] {
    alarm(10);  // a hang fails the test instead of the run
    test_server srv;
    auto holder = std::make_shared<std::shared_ptr<http_client>>(make_http_client());
    auto* raw = holder->get();
    raw->post(post_to(srv.url("/ok")), [holder](http_result) {
      holder->reset();
      std::exit(0);
    });
    holder.reset();
    std::this_thread::sleep_for(10s);
    std::_Exit(5);
  };
  EXPECT_EXIT(child(), ::testing::ExitedWithCode(0), "");
}

// Two clients whose callbacks each drop the other: A's callback destroys B,
// whose "stopped" callback destroys A. Neither destructor may wait for the
// other's thread, or each waits on the other for ever.
TEST(HttpClientDeathTest, TwoClientsDroppingEachOtherFromTheirCallbacksBothEnd) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  auto child = [] {
    alarm(10);
    {
      test_server srv;
      auto a = std::make_shared<std::shared_ptr<http_client>>(make_http_client());
      auto b = std::make_shared<std::shared_ptr<http_client>>(make_http_client());
      auto* raw_a = a->get();
      auto* raw_b = b->get();
      auto a_done = std::make_shared<std::promise<void>>();
      auto b_done = std::make_shared<std::promise<void>>();
      auto a_fut = a_done->get_future();
      auto b_fut = b_done->get_future();
      raw_b->post(post_to(srv.url("/hang"), 30s), [a, b_done](http_result r) {
        a->reset();  // on B's thread: the last reference to A
        if (r.error == "stopped")
          b_done->set_value();
      });
      if (!srv.wait_for_requests(1, 5s))
        std::_Exit(3);
      raw_a->post(post_to(srv.url("/ok")), [b, a_done](http_result) {
        b->reset();  // on A's thread: the last reference to B
        a_done->set_value();
      });
      a.reset();
      b.reset();
      if (a_fut.wait_for(5s) != std::future_status::ready ||
          b_fut.wait_for(5s) != std::future_status::ready)
        std::_Exit(4);
    }
    std::exit(0);
  };
  EXPECT_EXIT(child(), ::testing::ExitedWithCode(0), "");
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

// A self-signed certificate for `san` ("IP:127.0.0.1", "DNS:other.example").
struct test_cert {
  std::string cert_pem, key_pem;
};
test_cert make_cert(const char* san) {
  EVP_PKEY* key = EVP_EC_gen("P-256");
  X509* x = X509_new();
  X509_set_version(x, 2);
  ASN1_INTEGER_set(X509_get_serialNumber(x), 1);
  X509_gmtime_adj(X509_getm_notBefore(x), -60);
  X509_gmtime_adj(X509_getm_notAfter(x), 3600);
  X509_set_pubkey(x, key);
  X509_NAME* name = X509_get_subject_name(x);
  X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC, reinterpret_cast<const unsigned char*>("waggle test"),
                             -1, -1, 0);
  X509_set_issuer_name(x, name);
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, x, x, nullptr, nullptr, 0);
  X509_EXTENSION* ext = X509V3_EXT_conf_nid(nullptr, &ctx, NID_subject_alt_name, san);
  X509_add_ext(x, ext, -1);
  X509_EXTENSION_free(ext);
  X509_sign(x, key, EVP_sha256());
  auto to_string = [](auto write) {
    BIO* bio = BIO_new(BIO_s_mem());
    write(bio);
    char* data = nullptr;
    long len = BIO_get_mem_data(bio, &data);
    std::string out(data, static_cast<std::size_t>(len));
    BIO_free(bio);
    return out;
  };
  test_cert out{to_string([&](BIO* b) { PEM_write_bio_X509(b, x); }),
                to_string([&](BIO* b) { PEM_write_bio_PrivateKey(b, key, nullptr, nullptr, 0, nullptr, nullptr); })};
  X509_free(x);
  EVP_PKEY_free(key);
  return out;
}

ssl::context server_context(const test_cert& c) {
  ssl::context ctx(ssl::context::tls_server);
  ctx.use_certificate_chain(net::buffer(c.cert_pem));
  ctx.use_private_key(net::buffer(c.key_pem), ssl::context::pem);
  return ctx;
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
