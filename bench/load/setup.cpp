#include "bench/load/setup.hpp"

#include <atomic>
#include <condition_variable>
#include <thread>

#include <boost/asio/ip/tcp.hpp>

namespace waggle::bench {

std::string resolve_relay(const std::string& url, const std::string& host, relay_endpoint& out) {
  auto target = parse_ws_url(url);
  if (!target)
    return "not a ws:// URL: " + url;
  if (!host.empty())
    target->host_header = host;
  boost::asio::io_context ioc;
  boost::asio::ip::tcp::resolver resolver{ioc};
  boost::system::error_code ec;
  auto results = resolver.resolve(target->host, std::to_string(target->port), ec);
  if (ec || results.empty())
    return "cannot resolve " + target->host + ": " + ec.message();
  out.target = *target;
  out.endpoint = results.begin()->endpoint();
  out.relay_url = "ws://" + target->host_header;
  return "";
}

void error_list::add(std::string e) {
  std::lock_guard lock{mutex_};
  if (errors_.size() < 20)  // the first ones say enough
    errors_.push_back(std::move(e));
}

std::vector<std::string> error_list::take() {
  std::lock_guard lock{mutex_};
  return std::move(errors_);
}

size_t error_list::size() {
  std::lock_guard lock{mutex_};
  return errors_.size();
}

namespace {

// Copies of everything it uses: a handshake that settles after open_all gave
// up waiting must still find them.
struct opening {
  std::vector<relay_endpoint> relays;  // client i goes to relays[i % size]
  std::vector<std::shared_ptr<nostr_client>> clients;
  std::function<client_handlers(size_t)> handlers_of;
  std::shared_ptr<error_list> errors;
  std::unique_ptr<std::atomic<bool>[]> settled;
  std::atomic<size_t> next{0};
  std::atomic<size_t> ready{0};
  std::atomic<size_t> failed{0};

  void launch(const std::shared_ptr<opening>& self) {
    auto i = next.fetch_add(1);
    if (i >= clients.size())
      return;
    auto h = handlers_of(i);
    auto settle = [self, i](bool ok) {
      if (self->settled[i].exchange(true))
        return false;
      (ok ? self->ready : self->failed).fetch_add(1);
      self->launch(self);
      return true;
    };
    h.ready = [settle, inner = h.ready] {
      settle(true);
      if (inner)
        inner();
    };
    h.failed = [settle, inner = h.failed, this, i](const std::string& e) {
      if (settle(false))
        errors->add("connection " + std::to_string(i) + ": " + e);
      else if (inner)
        inner(e);
    };
    auto& relay = relays[i % relays.size()];
    clients[i]->start(relay.target, relay.endpoint, std::move(h));
  }
};

}  // namespace

size_t open_all(const relay_endpoint& relay, std::vector<std::shared_ptr<nostr_client>>& clients,
                const std::function<client_handlers(size_t)>& handlers_of, size_t parallel,
                std::chrono::seconds timeout, const std::shared_ptr<error_list>& errors) {
  return open_all(std::vector<relay_endpoint>{relay}, clients, handlers_of, parallel, timeout,
                  errors);
}

size_t open_all(const std::vector<relay_endpoint>& relays,
                std::vector<std::shared_ptr<nostr_client>>& clients,
                const std::function<client_handlers(size_t)>& handlers_of, size_t parallel,
                std::chrono::seconds timeout, const std::shared_ptr<error_list>& errors) {
  if (relays.empty())
    return 0;
  // Lives as long as any handler (they hold it), beyond this call.
  auto st = std::shared_ptr<opening>(new opening{relays, clients, handlers_of, errors, {}});
  st->settled.reset(new std::atomic<bool>[clients.size()]);
  for (size_t i = 0; i < clients.size(); ++i)
    st->settled[i] = false;
  for (size_t k = 0; k < std::max<size_t>(1, parallel); ++k)
    st->launch(st);
  auto until = std::chrono::steady_clock::now() + timeout;
  while (st->ready + st->failed < clients.size() && std::chrono::steady_clock::now() < until)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  st->next = clients.size();  // no more launches after this call
  return st->ready;
}

namespace {

// Sends frames over one client and waits for every OK.
class command_channel {
 public:
  explicit command_channel(std::shared_ptr<nostr_client> c) : client_(std::move(c)) {}

  void on_ok(std::string_view id, bool accepted, std::string_view message) {
    std::lock_guard lock{mutex_};
    if (!accepted && failure_.empty())
      failure_ = std::string{id.substr(0, 8)} + "…: " + std::string{message};
    ++answered_;
    cv_.notify_all();
  }

  // "" when every frame was accepted.
  std::string send_and_wait(const std::vector<std::string>& frames) {
    size_t goal;
    {
      std::lock_guard lock{mutex_};
      goal = answered_ + frames.size();
    }
    for (auto& f : frames)
      client_->send(f);
    std::unique_lock lock{mutex_};
    if (!cv_.wait_for(lock, std::chrono::seconds(60), [&] { return answered_ >= goal; }))
      return "no answer to a channel command within 60 s";
    return failure_;
  }

 private:
  std::shared_ptr<nostr_client> client_;
  std::mutex mutex_;
  std::condition_variable cv_;
  size_t answered_ = 0;
  std::string failure_;
};

std::string signed_frame(proto::event ev, const keypair& key) {
  ev.created_at = unix_now();
  proto::sign(ev, key.secret);
  return "[\"EVENT\"," + ev.raw + "]";
}

}  // namespace

namespace {

// One authenticated connection of `key` for commands; null and `failure` set
// when it did not open.
std::shared_ptr<command_channel> open_commands(const relay_endpoint& relay,
                                               boost::asio::io_context& ioc, const keypair& key,
                                               std::shared_ptr<nostr_client>& client,
                                               std::string& failure) {
  std::vector<std::shared_ptr<nostr_client>> clients{
    std::make_shared<nostr_client>(ioc, key, relay.relay_url)};
  auto commands = std::make_shared<command_channel>(clients[0]);
  auto errors = std::make_shared<error_list>();
  auto ready = open_all(
    relay, clients,
    [commands](size_t) {
      client_handlers h;
      h.ok = [commands](std::string_view id, bool ok, std::string_view m) {
        commands->on_ok(id, ok, m);
      };
      return h;
    },
    1, std::chrono::seconds(30), errors);
  if (ready != 1) {
    auto e = errors->take();
    failure = e.empty() ? std::string{"timeout"} : e.front();
    return nullptr;
  }
  client = clients[0];
  return commands;
}

}  // namespace

std::string create_channels(const relay_endpoint& relay, boost::asio::io_context& ioc,
                            const keypair& admin, const std::vector<std::string>& ids,
                            const std::vector<std::string>& members) {
  std::shared_ptr<nostr_client> client;
  std::string failure;
  auto commands = open_commands(relay, ioc, admin, client, failure);
  if (!commands)
    return "admin connection: " + failure;
  std::vector<std::string> creates, puts;
  for (auto& id : ids) {
    proto::event create;
    create.kind = 9007;
    create.tags = {{"h", id}, {"name", id}, {"public"}, {"open"}};
    creates.push_back(signed_frame(create, admin));
    // Several members per command, a bounded number of tags each.
    for (size_t at = 0; at < members.size(); at += 100) {
      proto::event put;
      put.kind = 9000;
      put.tags = {{"h", id}};
      for (size_t k = at; k < std::min(members.size(), at + 100); ++k)
        put.tags.push_back({"p", members[k], "member"});
      puts.push_back(signed_frame(put, admin));
    }
  }
  failure = commands->send_and_wait(creates);
  if (failure.empty())
    failure = commands->send_and_wait(puts);
  client->close();
  return failure.empty() ? "" : "channel set-up refused: " + failure;
}

std::string publish_events(const relay_endpoint& relay, boost::asio::io_context& ioc,
                           const keypair& key, const std::vector<proto::event>& events,
                           std::vector<std::string>* ids) {
  std::shared_ptr<nostr_client> client;
  std::string failure;
  auto commands = open_commands(relay, ioc, key, client, failure);
  if (!commands)
    return "connection: " + failure;
  std::vector<std::string> frames;
  for (auto& ev : events) {
    auto signed_ev = ev;
    signed_ev.created_at = unix_now();
    proto::sign(signed_ev, key.secret);
    frames.push_back("[\"EVENT\"," + signed_ev.raw + "]");
    if (ids)
      ids->push_back(signed_ev.id);
  }
  failure = commands->send_and_wait(frames);
  client->close();
  return failure.empty() ? "" : "refused: " + failure;
}

}  // namespace waggle::bench
