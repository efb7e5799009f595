#pragma once

// Set-up steps that go through the relay before the clock starts: opening
// authenticated connections in parallel, and creating channels with members.

#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <boost/asio/io_context.hpp>

#include "bench/load/client.hpp"

namespace waggle::bench {

struct relay_endpoint {
  ws_target target;
  boost::asio::ip::tcp::endpoint endpoint;
  std::string relay_url;  // what AUTH events name in their `relay` tag
};

// Resolves the URL (and Host override); error text on failure.
std::string resolve_relay(const std::string& url, const std::string& host, relay_endpoint& out);

// Thread-safe list of what went wrong during a run.
class error_list {
 public:
  void add(std::string e);
  std::vector<std::string> take();
  size_t size();

 private:
  std::mutex mutex_;
  std::vector<std::string> errors_;
};

// Opens `clients` with at most `parallel` handshakes at a time; `handlers_of(i)`
// gives each its handlers (its `ready` and `failed` are wrapped to count).
// Blocks until each is authenticated or failed, or `timeout` passed; returns
// how many are ready.
size_t open_all(const relay_endpoint& relay, std::vector<std::shared_ptr<nostr_client>>& clients,
                const std::function<client_handlers(size_t)>& handlers_of, size_t parallel,
                std::chrono::seconds timeout, const std::shared_ptr<error_list>& errors);
// The same over a cluster's nodes: client i connects to relays[i % relays.size()]
// (and must have been made with that node's relay_url, which its AUTH names).
size_t open_all(const std::vector<relay_endpoint>& relays,
                std::vector<std::shared_ptr<nostr_client>>& clients,
                const std::function<client_handlers(size_t)>& handlers_of, size_t parallel,
                std::chrono::seconds timeout, const std::shared_ptr<error_list>& errors);

// Creates channels `ids` (open, permanent) as `admin`, then puts `members`
// into each; returns "" or what failed.
std::string create_channels(const relay_endpoint& relay, boost::asio::io_context& ioc,
                            const keypair& admin, const std::vector<std::string>& ids,
                            const std::vector<std::string>& members);

// Signs `events` as `key` (created_at now), sends them over one connection
// and waits for every OK; "" when all were accepted, else what failed. The
// signed ids go to `ids` when given.
std::string publish_events(const relay_endpoint& relay, boost::asio::io_context& ioc,
                           const keypair& key, const std::vector<proto::event>& events,
                           std::vector<std::string>* ids = nullptr);

}  // namespace waggle::bench
