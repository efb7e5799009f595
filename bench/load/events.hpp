#pragma once

// Keys and pre-signed events: everything the tool signs for the load phase is
// signed before the clock starts, on every core.

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "messages/proto/event.hpp"

namespace waggle::bench {

struct keypair {
  std::string secret;
  std::string pubkey;
};

std::string random_hex(size_t bytes);
keypair random_keypair();

// Readable filler text of exactly `bytes` bytes, different for each `seed`.
// Its 18 words are all common: most texts hold most of them.
std::string filler(size_t bytes, uint64_t seed);

// The seed's topic words (bench/load/seed.cpp gives every event one, drawn by
// Zipf's law over `topic_words` ranks), so a search benchmark has rare words
// as well as filler's common ones. Rank 1 is the most frequent (about one
// event in 8), rank 1,000 about one in 8,000. Three consonant-vowel
// syllables: never one of filler's words, and one token to PostgreSQL.
constexpr size_t topic_words = 2000;
std::string topic_word(size_t rank);

// What the relay is sent: the id (to match the OK) and the whole frame.
struct prepared_event {
  std::string id;
  std::string frame;  // ["EVENT",{...}]
};

// The unsigned event number i and the key that signs it.
using event_maker = std::function<proto::event(size_t i, const keypair*& signer)>;

// Signs `count` events on `threads` threads, in index order.
std::vector<prepared_event> sign_all(size_t count, size_t threads, const event_maker& make);

// A NIP-42 answer to `challenge` for the relay at `relay_url`.
std::string auth_frame(const keypair& key, std::string_view challenge, const std::string& relay_url);

int64_t now_ns();  // steady clock
int64_t unix_now();

// When each published event left the tool, by id: subscribers turn receipts
// into delivery latencies with it. The index is built before the run and only
// read during it; the times are written once each, by the publishing strand.
class publish_clock {
 public:
  explicit publish_clock(const std::vector<prepared_event>& events);
  // Position of `id`, or -1 if this run did not publish it.
  int64_t index_of(std::string_view id) const;
  void mark_sent(size_t index, int64_t ns) { sent_[index].store(ns, std::memory_order_release); }
  int64_t sent_at(size_t index) const { return sent_[index].load(std::memory_order_acquire); }
  // Set by the publisher on `OK true` (not duplicate), with when the OK was
  // read: the events every subscriber (and listener) must receive, and where
  // a listener's latency starts. Read after the run.
  void mark_accepted(size_t index, int64_t ns) {
    accepted_at_[index].store(ns, std::memory_order_relaxed);
  }
  bool accepted(size_t index) const { return accepted_at(index) != 0; }
  int64_t accepted_at(size_t index) const {
    return accepted_at_[index].load(std::memory_order_relaxed);
  }
  size_t size() const { return size_; }

 private:
  std::unordered_map<std::string_view, uint32_t> index_;
  std::unique_ptr<std::atomic<int64_t>[]> sent_;
  std::unique_ptr<std::atomic<int64_t>[]> accepted_at_;
  size_t size_;
};

}  // namespace waggle::bench
