#pragma once

// Read admission of one connection (docs/protocol.md, "Read limits"): how
// many of its REQ/COUNT reads may be in flight at once, what each costs
// against its token buckets (the connection's own, and the node-wide ones of
// its pubkeys and its address), and which of its requests sit at the reader
// pool, so that a read whose caller gave up can be withdrawn there.
// A plain class: the connection actor asks it, the tests drive it directly.

#include <cstdint>
#include <memory>
#include <set>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "actors/support/token_bucket.hpp"
#include "messages/proto/filter.hpp"
#include "messages/proto/status.hpp"

namespace waggle {

struct read_admission_settings {
  size_t max_in_flight = 8;  // REQ (until EOSE) and COUNT (until its answer)
  bucket_rate per_connection{1000, 2000};
  // The node's per-pubkey and per-address buckets; null: none (actor tests,
  // replays).
  std::shared_ptr<shared_read_buckets> shared;
  // The per-address bucket of an IPv6 client is its prefix's (gateway::address_key).
  unsigned ipv6_prefix = 64;
};

// What a read costs in tokens: 1 + its filters + its filter values / 100
// (ids, authors, kinds and tag values, all filters together), so the widest
// REQ the limits allow (10 filters x 500 values) costs 61 and a one-id REQ 2;
// plus `search_read_cost` per search filter, which ranks up to
// --search-max-ranked rows where another filter reads at most its limit:
// 3-6 ms of the database for the commonest word of 200,000 notes, some 50
// one-id REQs' worth (docs/search.md, "Cost").
constexpr double search_read_cost = 100;
double read_cost(const std::vector<proto::filter>& filters);

struct read_refusal {
  status st;                 // ok: admitted
  std::string_view label;    // for metrics::count_refused
};

class read_admission {
 public:
  explicit read_admission(read_admission_settings s = {}) : settings_(std::move(s)) {}

  // Admits a read as `ticket` (unique per connection) or says why not. The
  // in-flight bound is checked first: a refused read takes no tokens.
  read_refusal admit(uint64_t ticket, std::string sub_id, bool is_count,
                     const std::vector<proto::filter>& filters,
                     const std::set<std::string>& pubkeys, const std::string& address,
                     bucket_clock::time_point now);
  // The ticket's current request at the reader pool (its request id), or 0
  // while it waits elsewhere (the hub's ack).
  void at_pool(uint64_t ticket, uint64_t request_id);
  void done(uint64_t ticket);
  // Ends the REQ tickets of `sub_id` (closed or replaced) and returns the
  // request ids to withdraw from the pool.
  std::vector<uint64_t> end_sub(const std::string& sub_id);
  // Whether any read of this connection sits at the pool (worth a withdrawal
  // when the socket goes away).
  bool any_at_pool() const;
  size_t in_flight() const { return tickets_.size(); }
  const read_admission_settings& settings() const { return settings_; }

 private:
  struct ticket_state {
    std::string sub_id;
    bool is_count = false;
    uint64_t request_id = 0;
  };
  read_admission_settings settings_;
  token_bucket own_;
  std::unordered_map<uint64_t, ticket_state> tickets_;
  // address_key of the last address seen (a connection has one).
  std::string address_, address_key_;
};

}  // namespace waggle
