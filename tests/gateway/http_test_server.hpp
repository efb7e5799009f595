#pragma once

// A small Beast server on 127.0.0.1 for the outbound HTTP client's tests
// (http_client_test, http_client_lifetime_test), and the helpers that post
// to it.

#include <chrono>
#include <condition_variable>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <openssl/pem.h>
#include <openssl/x509v3.h>

#include "gateway/http_client.hpp"

namespace waggle::gateway::test_support {

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
// By default a connection carries one exchange (the server shuts its side
// after the answer). With keep_alive it carries many, as the client asks,
// and then /close answers with "Connection: close", /drop-kept closes a
// connection that already carried an exchange without answering (a peer
// that timed the connection out as the request came), /twice sends a second
// answer (418) after its 200, /hints five 103s and its 500 300 ms later, and
// /continue-then-drop a 100 and then closes.
class test_server {
 public:
  explicit test_server(ssl::context* tls = nullptr, bool keep_alive = false)
    : tls_(tls), keep_alive_(keep_alive) {
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
  // Connections accepted so far.
  std::size_t connections() {
    std::lock_guard lock(m_);
    return accepted_;
  }
  // Connections whose client closed them (read an end of stream).
  std::size_t closed_by_client() {
    std::lock_guard lock(m_);
    return closed_by_client_;
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
    int served = 0;

    void read() {
      req = {};
      http::async_read(stream, buffer, req, [self = this->shared_from_this()](beast::error_code ec, std::size_t) {
        if (!ec)
          return self->answer();
        if (ec == http::error::end_of_stream && self->served > 0) {
          std::lock_guard lock(self->srv.m_);
          ++self->srv.closed_by_client_;
        }
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
      if (target == "/drop-kept" && srv.keep_alive_ && served > 0) {
        beast::error_code ignored;
        beast::get_lowest_layer(stream).close(ignored);
        return;
      }
      if (target == "/continue-then-drop") {
        return write_raw("HTTP/1.1 100 Continue\r\n\r\n", [self = this->shared_from_this()] {
          beast::error_code ignored;
          beast::get_lowest_layer(self->stream).close(ignored);
        });
      }
      if (target == "/hints") {
        std::string hints;
        for (int i = 0; i < 5; ++i)
          hints += "HTTP/1.1 103 Early Hints\r\n\r\n";
        return write_raw(hints, [self = this->shared_from_this()] {
          auto timer = std::make_shared<net::steady_timer>(self->stream.get_executor(), 300ms);
          timer->async_wait([self, timer](beast::error_code) {
            self->write_raw("HTTP/1.1 500 Late\r\nContent-Length: 0\r\n\r\n", [self] { self->read(); });
          });
        });
      }
      ++served;
      res = {};
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
      res.keep_alive(srv.keep_alive_ && req.keep_alive() && target != "/close");
      res.prepare_payload();
      bool twice = target == "/twice";
      http::async_write(stream, res, [self = this->shared_from_this(), twice](beast::error_code ec, std::size_t) {
        if (!ec && twice)
          return self->write_raw("HTTP/1.1 418 Again\r\nContent-Length: 0\r\n\r\n", [self] { self->read(); });
        if (!ec && self->res.keep_alive())
          return self->read();
        beast::error_code ignored;
        beast::get_lowest_layer(self->stream).shutdown(tcp::socket::shutdown_send, ignored);
      });
    }
    // Bytes as they are (a separate write: a TLS record of their own), then `next`.
    void write_raw(std::string text, std::function<void()> next) {
      auto held = std::make_shared<std::string>(std::move(text));
      net::async_write(stream, net::buffer(*held), [held, next = std::move(next)](beast::error_code ec, std::size_t) {
        if (!ec)
          next();
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
      {
        std::lock_guard lock(m_);
        ++accepted_;
      }
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
  bool keep_alive_;
  std::size_t accepted_ = 0;
  std::size_t closed_by_client_ = 0;
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
inline std::optional<outcome> post_and_wait(http_client& client, http_post p, std::chrono::seconds bound = 10s) {
  auto pr = std::make_shared<std::promise<outcome>>();
  auto fut = pr->get_future();
  client.post(std::move(p), [pr](http_result r) { pr->set_value({std::move(r), std::this_thread::get_id()}); });
  if (fut.wait_for(bound) != std::future_status::ready)
    return std::nullopt;
  return fut.get();
}

inline http_post post_to(std::string url, std::chrono::milliseconds timeout = 5000ms) {
  http_post p;
  p.url = std::move(url);
  p.body = R"({"kind":1})";
  p.timeout = timeout;
  return p;
}

// A self-signed certificate for `san` ("IP:127.0.0.1", "DNS:other.example").
struct test_cert {
  std::string cert_pem, key_pem;
};
inline test_cert make_cert(const char* san) {
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

inline ssl::context server_context(const test_cert& c) {
  ssl::context ctx(ssl::context::tls_server);
  ctx.use_certificate_chain(net::buffer(c.cert_pem));
  ctx.use_private_key(net::buffer(c.key_pem), ssl::context::pem);
  return ctx;
}

}  // namespace waggle::gateway::test_support
