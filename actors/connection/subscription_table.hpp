#pragma once

// The subscriptions of one connection (docs/architecture.md, "connection
// actor"): each REQ id's generation, its live flag and the live events held
// until its EOSE, the ids its history sent, the bytes it is charged (to the
// connection's cap and the node-wide budget), and the grants it was
// registered on, which revocations narrow until one allows no one. A plain
// class: the connection actor does the wiring (the hub, the pool, frames)
// and ends what this table says ended; the tests drive it directly.

#include <cstddef>
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "actors/connection/subscription_memory.hpp"
#include "messages/fanout.hpp"
#include "messages/reads.hpp"

namespace waggle {

struct subscription {
  uint64_t generation = 0;
  bool live = false;                // EOSE sent; live events go straight out
  std::vector<event_ptr> pending;   // live events that arrived before EOSE
  // Ids sent with the history (at most its limit). An event the history
  // query saw committed may still be on its way through ingest and the hub,
  // so live events are checked against these for the subscription's life.
  // Kept as sorted 32-byte ids: 5,000 ids cost 160 KB, not 750 KB of strings.
  std::vector<event_id_bin> history_ids;
  bool sent_in_history(const std::string& id) const;
  // Bytes charged for it (filters, history ids) to the connection and the node.
  size_t bytes = 0;
  // The channels its filters name with #h, each with the authority it was
  // granted on (open channel, and/or which of our pubkeys are members).
  // A channel_revoked that leaves a grant with neither ends the subscription.
  std::unordered_map<std::string, channel_grant> grants;
  // Access to the community itself, narrowed the same way; an
  // access_revoked that leaves it allowing no one ends the subscription.
  community_grant community;
};

// Why bytes could not be charged.
enum class subscription_charge : uint8_t { charged, over_connection_cap, over_node_budget };

// What a live event means for one of its subscriptions.
enum class live_verdict : uint8_t {
  stale,     // closed or replaced while the event was on its way: dropped
  send,      // live, and not sent with the history
  sent,      // live, but its history carried it: dropped
  held,      // before EOSE: held for after it
  overflow,  // before EOSE, and too many held: the subscription ends
};

class subscription_table {
 public:
  using map = std::unordered_map<std::string, subscription>;

  // `max_bytes`: the connection's cap (0 = none); `budget`: the node's (null: none).
  explicit subscription_table(size_t max_bytes = 0, memory_budget_ptr budget = nullptr)
    : max_bytes_(max_bytes), budget_(std::move(budget)) {}

  // A fresh number, for a REQ's generation or a read's ticket: never reused
  // on this connection, so a reply of an older one is told apart.
  uint64_t next_generation() { return ++next_generation_; }

  // Opens `sub_id` as `generation`. A REQ replacing an id removes the old
  // one first.
  subscription& add(const std::string& sub_id, uint64_t generation);
  // The subscription `sub_id`, created empty if missing.
  subscription& get(const std::string& sub_id) { return subs_[sub_id]; }
  subscription* find(const std::string& sub_id);
  bool contains(const std::string& sub_id) const { return subs_.contains(sub_id); }
  // Whether a reply for `generation` of `sub_id` is still wanted.
  bool is_current(const std::string& sub_id, uint64_t generation) const;
  // Forgets `sub_id` and gives its bytes back.
  void remove(const std::string& sub_id);
  size_t size() const { return subs_.size(); }

  // Charges `bytes` more to `sub_id` (created if missing): the connection's
  // cap first, then the node-wide budget; neither when either refuses.
  subscription_charge charge(const std::string& sub_id, size_t bytes);
  // Sum of every subscription's bytes (the connection's cap counts this).
  size_t bytes() const { return bytes_; }
  // Gives everything charged back to the node-wide budget (the connection's end).
  void release_all();

  // Remembers the ids of the history rows `raws` sent for `sub`.
  static void remember_history(subscription& sub, const std::vector<std::string>& raws);
  // A live event for `generation` of `sub_id`; `held` ones wait in pending.
  live_verdict on_live(const std::string& sub_id, uint64_t generation, const event_ptr& ev,
                       size_t max_pending);
  // EOSE: `sub_id` goes live. Returns its held live events that its history
  // did not carry, to send after the EOSE, in arrival order.
  std::vector<event_ptr> go_live(const std::string& sub_id);

  // The grants `sub_id`'s access check gave it: what revocations narrow.
  void grant(const std::string& sub_id, std::vector<channel_grant>&& grants,
             community_grant&& community);
  // Narrows `sub_id`'s grants to what the history's re-check also granted.
  // Returns why it may no longer read (restricted), or ok.
  status recheck(const std::string& sub_id, const std::vector<channel_grant>& grants,
                 const community_grant& community);
  // A channel revocation: narrows every grant on that channel. Returns the
  // subscriptions left with no authority on it, in table order.
  std::vector<std::string> revoke_channel(const channel_revoked& msg);
  // A community revocation (`pubkey` removed; empty: the community closed).
  // Returns the subscriptions whose checked grant allows no one now.
  std::vector<std::string> revoke_access(const std::string& pubkey);

  map::const_iterator begin() const { return subs_.begin(); }
  map::const_iterator end() const { return subs_.end(); }

 private:
  size_t max_bytes_ = 0;
  memory_budget_ptr budget_;
  map subs_;
  uint64_t next_generation_ = 0;
  size_t bytes_ = 0;  // sum of subs_' bytes
};

}  // namespace waggle
