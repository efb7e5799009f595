#include "gateway/http_client.hpp"

#include "gateway/name_resolver.hpp"

#include <sys/socket.h>

#include <atomic>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <map>
#include <mutex>
#include <set>
#include <thread>
#include <tuple>
#include <vector>

#include <boost/asio/connect.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
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

// An open connection to one origin: a plain socket or a TLS stream over one.
struct connection {
  std::optional<tcp::socket> plain;
  std::optional<ssl::stream<tcp::socket>> tls;
  std::chrono::steady_clock::time_point idle_since;

  tcp::socket& socket() { return tls ? tls->next_layer() : *plain; }
  void close() {
    beast::error_code ignored;
    socket().close(ignored);
  }
  // Taken from the pool: still worth a request? Only if nothing at all
  // waits to be read. A peer that closed its end while the connection idled
  // (a server's keep-alive timeout) has left an end of stream, a TLS peer
  // its close_notify; any other byte is out of step, since nothing was asked.
  bool still_open() {
    char byte;
    auto n = ::recv(socket().native_handle(), &byte, 1, MSG_PEEK | MSG_DONTWAIT);
    return n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
  }
  // Bytes already taken off the socket and held by TLS (a record read
  // together with the answer's last one): the peek cannot see them. Asio's
  // engine keeps input outside the BIO only when the BIO is full.
  bool tls_holds_input() {
    if (!tls)
      return false;
    auto* ssl = tls->native_handle();
    return SSL_has_pending(ssl) != 0 || BIO_ctrl_pending(SSL_get_rbio(ssl)) > 0;
  }
};

struct origin {
  bool tls = false;
  std::string host;
  uint16_t port = 0;
  auto operator<=>(const origin&) const = default;
};

// One POST, on a kept connection to its origin when one is idle, else on a
// new one. Every handler holds it by shared_ptr and returns at once when
// `finished`: the first of answer, error, deadline or stop wins and calls
// `done`.
struct exchange : std::enable_shared_from_this<exchange> {
  exchange(core& c, net::io_context& ioc, http_post p, std::function<void(http_result)> d)
    : owner(c), post(std::move(p)), done(std::move(d)), io(ioc.get_executor()), deadline(ioc) {}

  core& owner;
  http_post post;
  std::function<void(http_result)> done;
  http_url url;
  net::io_context::executor_type io;
  net::steady_timer deadline;
  std::unique_ptr<connection> conn;
  bool reused = false;  // conn came from the pool
  http::request<http::string_body> req;
  beast::flat_buffer buffer;
  std::optional<http::response_parser<http::string_body>> parser;
  int interim = 0;
  bool heard = false;  // some answer arrived, an interim one included: no retry after that
  bool finished = false;

  origin where() const { return {url.tls, url.host, url.port}; }
  template <class F>
  void with_stream(F&& f) {
    if (conn->tls)
      f(*conn->tls);
    else
      f(*conn->plain);
  }

  void start();
  void connect_fresh();
  void finish(http_result r, bool reusable = false);
  void fail(std::string error) { finish({0, std::move(error), {}}); }
  // A kept connection that fails before any byte of an answer was most
  // likely closed by its peer as the request went out: once, the request
  // goes again on a new connection.
  void fail_or_retry(std::string error);
  void on_connected();
  void write();
  void read_header();
  void on_header(bool body_too_long);
};

// Kept connections per origin: enough for every slot of a delivery queue
// to post to one listener at once; more are closed when they come back.
constexpr std::size_t idle_per_origin = 32;
// An idle connection older than this is closed (checked by a sweep while
// any are kept): below the keep-alive timeouts of common servers would be
// better, but still_open() catches the ones a server closed first.
constexpr auto idle_max = std::chrono::seconds(30);

// The io thread's state; touched only on that thread, except the queue
// itself (net::post is thread-safe).
struct core {
  net::io_context ioc{1};
  ssl::context ctx{ssl::context::tls_client};
  net::executor_work_guard<net::io_context::executor_type> work = net::make_work_guard(ioc);
  std::set<std::shared_ptr<exchange>> in_flight;
  std::map<origin, std::vector<std::unique_ptr<connection>>> idle;
  net::steady_timer sweeper{ioc};
  bool sweeping = false;
  bool stopping = false;
  // After the io_context: destroyed first, so no lookup thread posts to it
  // once it is gone (and stop() below already ended that).
  name_resolver names;

  void stop() {
    stopping = true;
    names.stop();
    // finish() erases from the set: walk a copy.
    auto all = in_flight;
    for (auto& x : all)
      x->fail("stopped");
    for (auto& [o, conns] : idle)
      for (auto& c : conns)
        c->close();
    idle.clear();
    sweeper.cancel();
    work.reset();
  }

  // The newest idle connection to `o` that is still open (the others, stale
  // or closed, are closed and dropped on the way).
  std::unique_ptr<connection> take(const origin& o) {
    auto it = idle.find(o);
    if (it == idle.end())
      return nullptr;
    auto& conns = it->second;
    std::unique_ptr<connection> found;
    while (!conns.empty() && !found) {
      auto c = std::move(conns.back());
      conns.pop_back();
      if (std::chrono::steady_clock::now() - c->idle_since < idle_max && c->still_open())
        found = std::move(c);
      else
        c->close();
    }
    if (conns.empty())
      idle.erase(it);
    return found;
  }

  void give_back(const origin& o, std::unique_ptr<connection> c) {
    auto& conns = idle[o];
    if (stopping || conns.size() >= idle_per_origin) {
      c->close();
      if (conns.empty())
        idle.erase(o);
      return;
    }
    c->idle_since = std::chrono::steady_clock::now();
    conns.push_back(std::move(c));
    arm_sweep();
  }

  void arm_sweep() {
    if (sweeping)
      return;
    sweeping = true;
    sweeper.expires_after(idle_max / 2);
    sweeper.async_wait([this](beast::error_code ec) {
      sweeping = false;
      if (ec || stopping)
        return;
      auto now = std::chrono::steady_clock::now();
      for (auto it = idle.begin(); it != idle.end();) {
        std::erase_if(it->second, [&](std::unique_ptr<connection>& c) {
          if (now - c->idle_since < idle_max)
            return false;
          c->close();
          return true;
        });
        it = it->second.empty() ? idle.erase(it) : std::next(it);
      }
      if (!idle.empty())
        arm_sweep();
    });
  }
};

void exchange::start() {
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

  deadline.expires_after(post.timeout);
  deadline.async_wait([self = shared_from_this()](beast::error_code ec) {
    if (!ec)
      self->fail("timeout");
  });
  conn = owner.take(where());
  if (conn) {
    reused = true;
    return write();
  }
  connect_fresh();
}

void exchange::connect_fresh() {
  reused = false;
  conn = std::make_unique<connection>();
  if (url.tls) {
    conn->tls.emplace(io, owner.ctx);
    beast::error_code ec;
    // SNI carries names only (RFC 6066), never an address literal.
    net::ip::make_address(url.host, ec);
    if (ec && !SSL_set_tlsext_host_name(conn->tls->native_handle(), url.host.c_str()))
      return fail("tls: cannot set server name");
    conn->tls->set_verify_mode(ssl::verify_peer);
    conn->tls->set_verify_callback(ssl::host_name_verification(url.host));
  } else {
    conn->plain.emplace(io);
  }
  auto on_connect = [self = shared_from_this()](beast::error_code ec) {
    if (self->finished)
      return;
    if (ec)
      return self->fail("connect: " + ec.message());
    self->on_connected();
  };
  // An address needs no lookup, and a lookup is a hop to a lookup thread and
  // back (listeners are mostly addresses on a private network).
  beast::error_code literal;
  auto address = net::ip::make_address(url.host, literal);
  if (!literal) {
    conn->socket().async_connect(tcp::endpoint{address, url.port}, on_connect);
    return;
  }
  owner.names.resolve(url.host, url.port, io,
                      [self = shared_from_this(), on_connect](std::string error,
                                                               gateway::name_resolver::endpoints found) {
                        if (self->finished)
                          return;
                        if (!error.empty())
                          return self->fail("resolve: " + error);
                        net::async_connect(self->conn->socket(), found,
                                           [on_connect](beast::error_code ec, const tcp::endpoint&) {
                                             on_connect(ec);
                                           });
                      });
}

void exchange::on_connected() {
  beast::error_code ignored;
  conn->socket().set_option(tcp::no_delay(true), ignored);
  if (!conn->tls)
    return write();
  conn->tls->async_handshake(ssl::stream_base::client, [self = shared_from_this()](beast::error_code ec) {
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
        return self->fail_or_retry("write: " + ec.message());
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
        return self->parser->got_some() || self->heard ? self->fail("read: " + ec.message())
                                        : self->fail_or_retry("read: " + ec.message());
      self->on_header(too_long);
    });
  });
}

void exchange::on_header(bool body_too_long) {
  heard = true;
  auto& res = parser->get();
  unsigned status = res.result_int();
  if (!body_too_long && status >= 100 && status < 200 && status != 101 && ++interim <= max_interim)
    return read_header();
  http_result r{static_cast<uint16_t>(status), {}, {}};
  if (status >= 300 && status < 400)
    r.location = std::string(res[http::field::location]);
  if (body_too_long)
    return finish(std::move(r));
  if (parser->is_done())
    return finish(std::move(r), true);
  // The rest of the body is read (up to the cap) so the listener sees its
  // answer taken; whatever goes wrong there, the status stands.
  with_stream([&](auto& s) {
    http::async_read(s, buffer, *parser,
                     [self = shared_from_this(), r = std::move(r)](beast::error_code ec, std::size_t) mutable {
                       if (!self->finished)
                         self->finish(std::move(r), !ec);
                     });
  });
}

void exchange::fail_or_retry(std::string error) {
  if (!reused || finished)
    return fail(std::move(error));
  conn->close();
  buffer.clear();
  parser.reset();
  interim = 0;
  connect_fresh();
}

void exchange::finish(http_result r, bool reusable) {
  if (finished)
    return;
  finished = true;
  deadline.cancel();
  // Kept only when a final answer ended where its framing says and the peer
  // keeps the connection: nothing of this exchange, nor anything after it,
  // may be left to read (an answer that would be taken for the next
  // request's). A 1xx past max_interim is no final answer: the real one is
  // still to come.
  if (conn && reusable && parser && parser->is_done() && parser->keep_alive() &&
      parser->get().result_int() >= 200 && buffer.size() == 0 && !conn->tls_holds_input())
    owner.give_back(where(), std::move(conn));
  else if (conn)
    conn->close();
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
      x->start();
    });
  }

 private:
  std::shared_ptr<core> core_;
  std::shared_ptr<std::atomic<bool>> ended_ = std::make_shared<std::atomic<bool>>(false);
  std::thread thread_;
};

}  // namespace

std::shared_ptr<http_client> make_http_client() { return make_http_client(http_client_options{}); }

std::shared_ptr<http_client> make_http_client(http_client_options options) {
  return std::make_shared<beast_http_client>(std::move(options));
}

}  // namespace waggle::gateway
