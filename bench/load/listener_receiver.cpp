#include "bench/load/listener_receiver.hpp"

#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http.hpp>
#include <rapidjson/document.h>

#include "bench/load/events.hpp"

namespace waggle::bench {

namespace http = boost::beast::http;
using boost::asio::ip::tcp;

bool parse_delivery(const std::string& body, std::string& event_id, std::string& delivery_id) {
  rapidjson::Document doc;
  doc.Parse(body.c_str(), body.size());
  if (doc.HasParseError() || !doc.IsObject())
    return false;
  auto d = doc.FindMember("delivery_id");
  auto e = doc.FindMember("event");
  if (d == doc.MemberEnd() || !d->value.IsString() || e == doc.MemberEnd() || !e->value.IsObject())
    return false;
  auto id = e->value.FindMember("id");
  if (id == e->value.MemberEnd() || !id->value.IsString())
    return false;
  delivery_id.assign(d->value.GetString(), d->value.GetStringLength());
  event_id.assign(id->value.GetString(), id->value.GetStringLength());
  return true;
}

// One accepted connection; lives as long as a handler (or, stalled, the
// receiver's held list) holds it.
struct listener_receiver::session : std::enable_shared_from_this<session> {
  session(listener_receiver& owner, tcp::socket s) : owner(owner), socket(std::move(s)) {}

  void read() {
    request = {};
    http::async_read(socket, buffer, request,
                     [self = shared_from_this()](boost::system::error_code ec, size_t) {
                       self->on_read(ec);
                     });
  }

  void on_read(boost::system::error_code ec) {
    if (ec)
      return;  // the relay closed or gave up (its timeout); nothing to answer
    receipt r;
    r.at_ns = now_ns();
    parse_delivery(request.body(), r.event_id, r.delivery_id);
    owner.record(std::move(r), owner.stalled_ ? shared_from_this() : nullptr);
    if (owner.stalled_)
      return;  // held open, never answered
    response = {http::status::ok, request.version()};
    response.set(http::field::content_type, "application/json");
    response.keep_alive(request.keep_alive());
    response.body() = "{}";
    response.prepare_payload();
    http::async_write(socket, response,
                      [self = shared_from_this()](boost::system::error_code ec, size_t) {
                        if (ec)
                          return;
                        if (self->response.keep_alive())
                          return self->read();
                        boost::system::error_code ignored;
                        self->socket.shutdown(tcp::socket::shutdown_both, ignored);
                      });
  }

  listener_receiver& owner;
  tcp::socket socket;
  boost::beast::flat_buffer buffer;
  http::request<http::string_body> request;
  http::response<http::string_body> response;
};

listener_receiver::listener_receiver(uint16_t port, bool stalled)
    : acceptor_(ioc_), stalled_(stalled) {
  tcp::endpoint at{boost::asio::ip::make_address("127.0.0.1"), port};
  acceptor_.open(at.protocol());
  // The script gives the same ports to every run against one relay.
  acceptor_.set_option(tcp::acceptor::reuse_address(true));
  acceptor_.bind(at);
  acceptor_.listen();
  port_ = acceptor_.local_endpoint().port();
  accept();
  thread_ = std::thread([this] { ioc_.run(); });
}

listener_receiver::~listener_receiver() { stop(); }

void listener_receiver::accept() {
  acceptor_.async_accept([this](boost::system::error_code ec, tcp::socket s) {
    if (ec)
      return;  // closed by stop()
    std::make_shared<session>(*this, std::move(s))->read();
    accept();
  });
}

void listener_receiver::record(receipt r, const std::shared_ptr<session>& held) {
  requests_.fetch_add(1, std::memory_order_relaxed);
  std::lock_guard lock{mutex_};
  receipts_.push_back(std::move(r));
  // Bounded: a run sends each stalled listener at most a few thousand requests.
  if (held && held_.size() < 100'000)
    held_.push_back(held);
}

void listener_receiver::stop() {
  {
    std::lock_guard lock{mutex_};
    if (stopped_)
      return;
    stopped_ = true;
  }
  // Sessions still reading keep the loop busy: stop it outright, then close
  // what is left from this thread (the io thread is gone).
  ioc_.stop();
  if (thread_.joinable())
    thread_.join();
  boost::system::error_code ignored;
  acceptor_.close(ignored);
  std::lock_guard lock{mutex_};
  for (auto& s : held_)
    s->socket.close(ignored);
  held_.clear();
}

std::vector<listener_receiver::receipt> listener_receiver::receipts() {
  std::lock_guard lock{mutex_};
  return receipts_;
}

}  // namespace waggle::bench
