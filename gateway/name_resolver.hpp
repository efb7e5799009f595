#pragma once

// Host name lookups for the HTTP client (docs/delivery.md, "Names"). Asio's
// resolver runs every lookup of an io_context on one private thread, so one
// listener whose DNS answers slowly (a dead nameserver of its domain: seconds
// per try) held every other listener's new connections behind it. Here each
// name is looked up at most once at a time, on its own thread (up to
// `max_lookups` threads, queued beyond), and answers are kept for `ttl`: a
// slow name delays only the requests to that name.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/ip/tcp.hpp>

namespace waggle::gateway {

class name_resolver {
 public:
  using endpoints = std::vector<boost::asio::ip::tcp::endpoint>;
  // error empty: found (endpoints not empty).
  using handler = std::function<void(std::string error, endpoints found)>;
  // Blocking; runs on a lookup thread. The default is getaddrinfo.
  using lookup_fn = std::function<std::pair<std::string, endpoints>(const std::string& host,
                                                                    uint16_t port)>;

  struct settings {
    size_t max_lookups = 8;  // threads at most; names beyond wait for one to end
    std::chrono::seconds ttl{30};  // an answer is reused this long (failures are not kept)
    lookup_fn lookup;              // empty: getaddrinfo
  };

  explicit name_resolver(settings s);
  name_resolver() : name_resolver(settings{}) {}
  ~name_resolver();  // stop()
  name_resolver(const name_resolver&) = delete;
  name_resolver& operator=(const name_resolver&) = delete;

  // `done` runs on `ex`, once, unless the resolver stops first (then never:
  // whoever stops it fails its requests itself).
  void resolve(const std::string& host, uint16_t port, boost::asio::any_io_executor ex,
               handler done);

  // Drops every waiting handler; lookups still running end on their own
  // threads and post nothing. Safe to call more than once.
  void stop();

  // Lookup threads alive now (they outlive stop() until their lookup ends).
  size_t running() const;

  struct state;

 private:
  std::shared_ptr<state> state_;
};

}  // namespace waggle::gateway
