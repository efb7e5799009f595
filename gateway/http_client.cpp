#include "gateway/http_client.hpp"

#include <atomic>
#include <cctype>
#include <cstdlib>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include <boost/asio/connect.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/address_v6.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

namespace waggle::gateway {

namespace beast = boost::beast;
namespace http = beast::http;
namespace net = boost::asio;
namespace ssl = net::ssl;
using tcp = net::ip::tcp;

namespace {

// What a listener may send back: the status is what matters, so a large body
// is cut short (the status still counts) and a large header is refused.
constexpr std::size_t body_cap = 64 * 1024;
constexpr std::size_t header_cap = 16 * 1024;
// Interim answers (103 Early Hints...) skipped before the final one.
constexpr int max_interim = 4;

bool is_token_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || std::string_view("!#$%&'*+-.^_`|~").find(c) !=
                                                          std::string_view::npos;
}

// A caller's header must not split the request (CR/LF) nor change its framing.
bool header_ok(const std::string& name, const std::string& value) {
  if (name.empty())
    return false;
  for (char c : name)
    if (!is_token_char(c))
      return false;
  for (char c : value)
    if (c == '\r' || c == '\n' || c == '\0')
      return false;
  for (auto reserved : {"host", "content-length", "transfer-encoding", "connection", "user-agent",
                        "content-type"})
    if (beast::iequals(name, reserved))
      return false;
  return true;
}

struct core;

// One POST on its own connection. Every handler holds it by shared_ptr and
// returns at once when `finished`: the first of answer, error, deadline or
// stop wins and calls `done`.
struct exchange : std::enable_shared_from_this<exchange> {
  exchange(core& c, net::io_context& ioc, http_post p, std::function<void(http_result)> d)
    : owner(c), post(std::move(p)), done(std::move(d)), resolver(ioc), deadline(ioc) {}

  core& owner;
  http_post post;
  std::function<void(http_result)> done;
  http_url url;
  tcp::resolver resolver;
  net::steady_timer deadline;
  std::optional<tcp::socket> plain;
  std::optional<ssl::stream<tcp::socket>> tls;
  http::request<http::string_body> req;
  beast::flat_buffer buffer;
  std::optional<http::response_parser<http::string_body>> parser;
  int interim = 0;
  bool finished = false;

  tcp::socket& socket() { return tls ? tls->next_layer() : *plain; }
  template <class F>
  void with_stream(F&& f) {
    if (tls)
      f(*tls);
    else
      f(*plain);
  }

  void start(ssl::context& ctx);
  void finish(http_result r);
  void fail(std::string error) { finish({0, std::move(error), {}}); }
  void on_connected();
  void write();
  void read_header();
  void on_header(bool body_too_long);
};

// The io thread's state; touched only on that thread, except the queue
// itself (net::post is thread-safe).
struct core {
  net::io_context ioc{1};
  ssl::context ctx{ssl::context::tls_client};
  net::executor_work_guard<net::io_context::executor_type> work = net::make_work_guard(ioc);
  std::set<std::shared_ptr<exchange>> in_flight;
  bool stopping = false;

  void stop() {
    stopping = true;
    // finish() erases from the set: walk a copy.
    auto all = in_flight;
    for (auto& x : all)
      x->fail("stopped");
    work.reset();
  }
};

void exchange::start(ssl::context& ctx) {
  auto parsed = parse_http_url(post.url);
  if (!parsed)
    return fail("bad url: not an http(s) URL we can POST to");
  url = std::move(*parsed);
  req.method(http::verb::post);
  req.target(url.target);
  req.version(11);
  bool default_port = url.port == (url.tls ? 443 : 80);
  std::string host = url.host.find(':') != std::string::npos ? "[" + url.host + "]" : url.host;
  req.set(http::field::host, default_port ? host : host + ":" + std::to_string(url.port));
  req.set(http::field::user_agent, "waggle");
  req.set(http::field::content_type, post.content_type);
  req.set(http::field::connection, "close");
  for (auto& [name, value] : post.headers) {
    if (!header_ok(name, value))
      return fail("bad header");
    req.insert(name, value);
  }
  for (char c : post.content_type)
    if (c == '\r' || c == '\n' || c == '\0')
      return fail("bad header");
  req.body() = std::move(post.body);
  req.prepare_payload();

  if (url.tls) {
    tls.emplace(resolver.get_executor(), ctx);
    beast::error_code ec;
    // SNI carries names only (RFC 6066), never an address literal.
    net::ip::make_address(url.host, ec);
    if (ec && !SSL_set_tlsext_host_name(tls->native_handle(), url.host.c_str()))
      return fail("tls: cannot set server name");
    tls->set_verify_mode(ssl::verify_peer);
    tls->set_verify_callback(ssl::host_name_verification(url.host));
  } else {
    plain.emplace(resolver.get_executor());
  }

  deadline.expires_after(post.timeout);
  deadline.async_wait([self = shared_from_this()](beast::error_code ec) {
    if (!ec)
      self->fail("timeout");
  });
  resolver.async_resolve(url.host, std::to_string(url.port),
                         [self = shared_from_this()](beast::error_code ec, tcp::resolver::results_type r) {
                           if (self->finished)
                             return;
                           if (ec)
                             return self->fail("resolve: " + ec.message());
                           net::async_connect(self->socket(), r,
                                              [self](beast::error_code ec, const tcp::endpoint&) {
                                                if (self->finished)
                                                  return;
                                                if (ec)
                                                  return self->fail("connect: " + ec.message());
                                                self->on_connected();
                                              });
                         });
}

void exchange::on_connected() {
  if (!tls)
    return write();
  tls->async_handshake(ssl::stream_base::client, [self = shared_from_this()](beast::error_code ec) {
    if (self->finished)
      return;
    if (ec)
      return self->fail("tls: " + ec.message());
    self->write();
  });
}

void exchange::write() {
  with_stream([&](auto& s) {
    http::async_write(s, req, [self = shared_from_this()](beast::error_code ec, std::size_t) {
      if (self->finished)
        return;
      if (ec)
        return self->fail("write: " + ec.message());
      self->read_header();
    });
  });
}

void exchange::read_header() {
  parser.emplace();
  parser->header_limit(header_cap);
  parser->body_limit(body_cap);
  with_stream([&](auto& s) {
    http::async_read_header(s, buffer, *parser, [self = shared_from_this()](beast::error_code ec, std::size_t) {
      if (self->finished)
        return;
      // A Content-Length beyond the cap is refused once the fields are in
      // (Beast leaves is_header_done() false then, yet the status line and
      // fields are parsed): the status is what we came for.
      bool too_long = ec == http::error::body_limit;
      if (ec && !too_long)
        return self->fail("read: " + ec.message());
      self->on_header(too_long);
    });
  });
}

void exchange::on_header(bool body_too_long) {
  auto& res = parser->get();
  unsigned status = res.result_int();
  if (!body_too_long && status >= 100 && status < 200 && status != 101 && ++interim <= max_interim)
    return read_header();
  http_result r{static_cast<uint16_t>(status), {}, {}};
  if (status >= 300 && status < 400)
    r.location = std::string(res[http::field::location]);
  if (body_too_long || parser->is_done())
    return finish(std::move(r));
  // The rest of the body is read (up to the cap) so the listener sees its
  // answer taken; whatever goes wrong there, the status stands.
  with_stream([&](auto& s) {
    http::async_read(s, buffer, *parser,
                     [self = shared_from_this(), r = std::move(r)](beast::error_code, std::size_t) mutable {
                       if (!self->finished)
                         self->finish(std::move(r));
                     });
  });
}

void exchange::finish(http_result r) {
  if (finished)
    return;
  finished = true;
  beast::error_code ignored;
  deadline.cancel();
  resolver.cancel();
  if (plain || tls)
    socket().close(ignored);
  auto self = shared_from_this();
  owner.in_flight.erase(self);
  auto d = std::move(done);
  // A throwing callback must not end the io thread (and with it every other
  // exchange): the exception has nowhere better to go.
  try {
    d(std::move(r));
  } catch (...) {
  }
}

// Set on every client's io thread. A client destroyed there (inside a `done`,
// its own client's or another's) must not join: not its own thread, and not
// another client's either, or two clients whose callbacks drop each other
// would each wait for the other forever.
thread_local bool on_client_io_thread = false;

// Where the threads of clients destroyed on an io thread go. Detaching them is
// not enough: if the process then exits while such a thread is still freeing
// its SSL context, exit() tears OpenSSL down under it (about one run in 150 of
// DroppingTheClientFromItsOwnCallbackDoesNotDeadlock crashed at exit). They
// are joined at exit by a handler registered on first use, after OpenSSL
// registered its own clean-up (the first client's SSL context), so it runs
// first. The reaper itself is never destroyed, so an adoption that comes
// late (a callback running during exit) still finds it. Threads that already
// ended are joined at each adoption: a program that drops many clients this
// way holds only the ones still ending.
class io_thread_reaper {
 public:
  static io_thread_reaper& instance() {
    static io_thread_reaper* reaper = [] {
      auto* r = new io_thread_reaper;
      std::atexit([] { instance().join_all(); });
      return r;
    }();
    return *reaper;
  }

  void adopt(std::thread thread, std::shared_ptr<std::atomic<bool>> ended) {
    std::lock_guard lock(m_);
    std::erase_if(orphans_, [](orphan& o) {
      if (!o.ended->load())
        return false;
      o.thread.join();
      return true;
    });
    orphans_.push_back({std::move(thread), std::move(ended)});
  }

 private:
  struct orphan {
    std::thread thread;
    std::shared_ptr<std::atomic<bool>> ended;
  };

  // Joins outside the lock (a thread being joined may still adopt another)
  // until nothing is left. exit() called from an orphan's own callback runs
  // this on that orphan: it cannot join itself, and needs not, as it is the
  // thread doing the exit.
  void join_all() {
    for (;;) {
      std::vector<orphan> batch;
      {
        std::lock_guard lock(m_);
        batch.swap(orphans_);
      }
      if (batch.empty())
        return;
      for (auto& o : batch) {
        if (o.thread.get_id() == std::this_thread::get_id())
          o.thread.detach();
        else
          o.thread.join();
      }
    }
  }

  std::mutex m_;
  std::vector<orphan> orphans_;
};

class beast_http_client final : public http_client {
 public:
  explicit beast_http_client(http_client_options options) : core_(std::make_shared<core>()) {
    core_->ctx.set_options(ssl::context::default_workarounds | ssl::context::no_sslv2 |
                           ssl::context::no_sslv3 | ssl::context::no_tlsv1 | ssl::context::no_tlsv1_1);
    core_->ctx.set_default_verify_paths();
    core_->ctx.set_verify_mode(ssl::verify_peer);
    if (!options.extra_ca_pem.empty())
      core_->ctx.add_certificate_authority(net::buffer(options.extra_ca_pem));
    // The thread keeps the core alive, so a client destroyed inside a `done`
    // can hand the thread to the reaper instead of joining it; `ended` tells
    // the reaper the core is gone.
    thread_ = std::thread([c = core_, ended = ended_]() mutable {
      on_client_io_thread = true;
      c->ioc.run();
      c.reset();
      ended->store(true);
    });
  }

  ~beast_http_client() override {
    net::post(core_->ioc, [c = core_.get()] { c->stop(); });
    if (on_client_io_thread)
      io_thread_reaper::instance().adopt(std::move(thread_), ended_);
    else
      thread_.join();
  }

  void post(http_post request, std::function<void(http_result)> done) override {
    net::post(core_->ioc, [c = core_.get(), request = std::move(request), done = std::move(done)]() mutable {
      auto x = std::make_shared<exchange>(*c, c->ioc, std::move(request), std::move(done));
      if (c->stopping)
        return x->fail("stopped");
      c->in_flight.insert(x);
      x->start(c->ctx);
    });
  }

 private:
  std::shared_ptr<core> core_;
  std::shared_ptr<std::atomic<bool>> ended_ = std::make_shared<std::atomic<bool>>(false);
  std::thread thread_;
};

bool host_char_ok(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '.' || c == '_';
}

}  // namespace

std::shared_ptr<http_client> make_http_client() { return make_http_client(http_client_options{}); }

std::shared_ptr<http_client> make_http_client(http_client_options options) {
  return std::make_shared<beast_http_client>(std::move(options));
}

std::optional<http_url> parse_http_url(std::string_view url) {
  // Nothing a parser elsewhere could read differently: no spaces, controls,
  // non-ASCII bytes, backslashes or fragments anywhere.
  for (char c : url) {
    auto u = static_cast<unsigned char>(c);
    if (u <= 0x20 || u >= 0x7f || c == '\\' || c == '#')
      return std::nullopt;
  }
  auto sep = url.find("://");
  if (sep == std::string_view::npos)
    return std::nullopt;
  http_url out;
  auto scheme = url.substr(0, sep);
  if (beast::iequals(scheme, "https"))
    out.tls = true;
  else if (!beast::iequals(scheme, "http"))
    return std::nullopt;
  auto rest = url.substr(sep + 3);
  auto end = rest.find_first_of("/?");
  auto authority = rest.substr(0, end);
  auto target = end == std::string_view::npos ? std::string_view{} : rest.substr(end);
  if (authority.find('@') != std::string_view::npos)
    return std::nullopt;

  std::string_view port;
  if (!authority.empty() && authority.front() == '[') {
    auto close = authority.find(']');
    if (close == std::string_view::npos)
      return std::nullopt;
    out.host = std::string(authority.substr(1, close - 1));
    beast::error_code ec;
    // A zone (%25eth0) names an interface of this machine: not a listener's.
    if (out.host.find('%') != std::string::npos)
      return std::nullopt;
    net::ip::make_address_v6(out.host, ec);
    if (ec)
      return std::nullopt;
    auto after = authority.substr(close + 1);
    if (!after.empty()) {
      if (after.front() != ':')
        return std::nullopt;
      port = after.substr(1);
      if (port.empty())
        return std::nullopt;
    }
  } else {
    auto colon = authority.find(':');
    out.host = std::string(authority.substr(0, colon));
    if (colon != std::string_view::npos) {
      port = authority.substr(colon + 1);
      if (port.empty())
        return std::nullopt;
    }
    for (char c : out.host)
      if (!host_char_ok(c))
        return std::nullopt;
  }
  if (out.host.empty())
    return std::nullopt;

  if (port.empty()) {
    out.port = out.tls ? 443 : 80;
  } else {
    if (port.size() > 5)
      return std::nullopt;
    unsigned value = 0;
    for (char c : port) {
      if (c < '0' || c > '9')
        return std::nullopt;
      value = value * 10 + unsigned(c - '0');
    }
    if (value < 1 || value > 65535)
      return std::nullopt;
    out.port = static_cast<uint16_t>(value);
  }

  if (target.empty())
    out.target = "/";
  else if (target.front() == '?')
    out.target = "/" + std::string(target);
  else
    out.target = std::string(target);
  return out;
}

}  // namespace waggle::gateway
