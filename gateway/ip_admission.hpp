#pragma once

// Who a connection comes from, and whether one more may come from there:
// the X-Forwarded-For rule for trusted proxies and the per-address table
// (open connections and a new-connections token bucket). Pure logic behind
// a mutex, so tests/gateway can drive it without sockets.

#include <chrono>
#include <cstddef>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace waggle::gateway {

// `ip` as the node compares addresses: trimmed, an IPv4-mapped IPv6 address
// as plain IPv4; "" when it is not an IP address at all.
std::string canonical_ip(std::string_view ip);

// The key per-address limits count `ip` (canonical) under: an IPv4 address
// itself, an IPv6 address its first `ipv6_prefix` bits ("2001:db8:1:2::/64").
// One IPv6 subscriber holds a whole /64 (often a /56), so keying the full
// address would give every client 2^64 caps. Text that is not an address is
// its own key. `ipv6_prefix` >= 128 keys the full address.
std::string address_key(std::string_view ip, unsigned ipv6_prefix);

// True when `peer` (canonical) is one of `trusted` (canonical addresses).
bool is_trusted_proxy(std::string_view peer, const std::vector<std::string>& trusted);

// The client address of a request that arrived from `peer`. Only when the
// peer is a trusted proxy is X-Forwarded-For read: walking it from the right
// (the entry our proxy appended), trusted proxies are skipped and the first
// untrusted entry is the client. A malformed entry ends the walk there (the
// last address we could trust to have written it is taken); without the
// header, or from any other peer, the peer itself is the client.
std::string effective_client_ip(std::string_view peer, std::string_view forwarded_for,
                                const std::vector<std::string>& trusted);

// Open connections and a token bucket of new connections per address. A
// bucket refills at `rate` per second up to `burst`; 0 turns a limit off.
class ip_table {
 public:
  using clock = std::chrono::steady_clock;
  enum class verdict { admitted, too_many, too_fast };

  ip_table(std::size_t max_per_ip, double rate, double burst)
    : max_per_ip_(max_per_ip), rate_(rate), burst_(burst) {}

  // A new connection from `ip`: takes a token and an open slot (release()
  // gives the slot back), or neither.
  verdict admit(const std::string& ip, clock::time_point now = clock::now());
  // Moves an open slot (no token taken): a keep-alive connection through a
  // proxy whose next request is another client's.
  verdict transfer(const std::string& from, const std::string& to);
  void release(const std::string& ip);

  std::size_t open(const std::string& ip) const;
  // Addresses remembered (open connections or a bucket still refilling).
  std::size_t size() const;

 private:
  struct entry {
    std::size_t open = 0;
    double tokens = 0;
    clock::time_point refilled{};
  };
  void refill(entry& e, clock::time_point now) const;
  void prune(clock::time_point now);

  const std::size_t max_per_ip_;
  const double rate_;
  const double burst_;
  mutable std::mutex mtx_;
  std::unordered_map<std::string, entry> table_;
  std::size_t admits_since_prune_ = 0;
  std::size_t prune_after_ = 1024;
};

}  // namespace waggle::gateway
