#include "gateway/name_resolver.hpp"

#include <netdb.h>
#include <sys/socket.h>

#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <thread>

#include <boost/asio/post.hpp>

namespace waggle::gateway {

namespace {

using clock = std::chrono::steady_clock;
using tcp = boost::asio::ip::tcp;

// Names answered at once, kept; more (a misconfiguration, not a team's
// listeners) and the expired ones go, then all.
constexpr size_t max_cached = 1024;

std::pair<std::string, name_resolver::endpoints> system_lookup(const std::string& host,
                                                               uint16_t port) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_ADDRCONFIG | AI_NUMERICSERV;
  addrinfo* found = nullptr;
  auto service = std::to_string(port);
  int rc = ::getaddrinfo(host.c_str(), service.c_str(), &hints, &found);
  if (rc != 0)
    return {rc == EAI_SYSTEM ? std::string{"system error"} : std::string{::gai_strerror(rc)}, {}};
  name_resolver::endpoints out;
  for (auto* a = found; a; a = a->ai_next) {
    tcp::endpoint ep;
    if (a->ai_addrlen <= ep.capacity()) {
      std::memcpy(ep.data(), a->ai_addr, a->ai_addrlen);
      ep.resize(a->ai_addrlen);
      out.push_back(ep);
    }
  }
  ::freeaddrinfo(found);
  if (out.empty())
    return {"no address", {}};
  return {"", std::move(out)};
}

struct waiter {
  boost::asio::any_io_executor ex;
  name_resolver::handler done;
};

struct name_key {
  std::string host;
  uint16_t port = 0;
  auto operator<=>(const name_key&) const = default;
};

struct cached {
  name_resolver::endpoints found;
  clock::time_point until;
};

}  // namespace

// Shared with the lookup threads, which may outlive the resolver: a thread
// that ends after stop() finds `stopped` and posts nothing.
struct name_resolver::state {
  std::mutex mutex;
  settings cfg;
  bool stopped = false;
  size_t threads = 0;
  std::map<name_key, cached> cache;
  std::map<name_key, std::vector<waiter>> pending;  // one lookup each, queued or running
  std::deque<name_key> queue;

  // Under `mutex`.
  void remember(const name_key& key, const endpoints& found) {
    auto now = clock::now();
    if (cache.size() >= max_cached)
      std::erase_if(cache, [now](const auto& kv) { return kv.second.until <= now; });
    if (cache.size() >= max_cached)
      cache.clear();
    cache[key] = {found, now + cfg.ttl};
  }
};

namespace {

void run_lookups(std::shared_ptr<name_resolver::state> st) {
  std::unique_lock lock(st->mutex);
  while (!st->stopped && !st->queue.empty()) {
    auto key = st->queue.front();
    st->queue.pop_front();
    auto lookup = st->cfg.lookup;
    lock.unlock();
    auto [error, found] = lookup ? lookup(key.host, key.port) : system_lookup(key.host, key.port);
    lock.lock();
    if (st->stopped)
      break;
    if (error.empty())
      st->remember(key, found);
    auto node = st->pending.extract(key);
    if (node.empty())
      continue;
    for (auto& w : node.mapped())
      boost::asio::post(w.ex, [done = std::move(w.done), error, found] { done(error, found); });
  }
  --st->threads;
}

}  // namespace

name_resolver::name_resolver(settings s) : state_(std::make_shared<state>()) {
  state_->cfg = std::move(s);
  if (state_->cfg.max_lookups == 0)
    state_->cfg.max_lookups = 1;
}

name_resolver::~name_resolver() { stop(); }

void name_resolver::resolve(const std::string& host, uint16_t port, boost::asio::any_io_executor ex,
                            handler done) {
  std::lock_guard lock(state_->mutex);
  if (state_->stopped)
    return;
  name_key key{host, port};
  if (auto hit = state_->cache.find(key); hit != state_->cache.end()) {
    if (hit->second.until > clock::now()) {
      boost::asio::post(ex, [done = std::move(done), found = hit->second.found] { done("", found); });
      return;
    }
    state_->cache.erase(hit);
  }
  auto& waiting = state_->pending[key];
  waiting.push_back({std::move(ex), std::move(done)});
  if (waiting.size() > 1)
    return;  // its lookup is queued or running already
  state_->queue.push_back(key);
  if (state_->threads < state_->cfg.max_lookups) {
    ++state_->threads;
    try {
      // Detached: a lookup cannot be cancelled, and stopping must not wait
      // for a nameserver. The thread holds the state, never the resolver.
      std::thread(run_lookups, state_).detach();
    } catch (const std::system_error&) {
      --state_->threads;
      if (state_->threads == 0) {
        // No thread will come for the queue: answer this name now.
        state_->queue.pop_back();
        auto node = state_->pending.extract(key);
        for (auto& w : node.mapped())
          boost::asio::post(w.ex, [done = std::move(w.done)] { done("no thread for the lookup", {}); });
      }
    }
  }
}

size_t name_resolver::running() const {
  std::lock_guard lock(state_->mutex);
  return state_->threads;
}

void name_resolver::stop() {
  std::lock_guard lock(state_->mutex);
  state_->stopped = true;
  state_->pending.clear();
  state_->queue.clear();
}

}  // namespace waggle::gateway
