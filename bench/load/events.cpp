#include "bench/load/events.hpp"

#include <chrono>
#include <random>
#include <thread>

#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

namespace waggle::bench {

std::string random_hex(size_t bytes) {
  thread_local std::mt19937_64 rng{std::random_device{}()};
  std::vector<unsigned char> raw(bytes);
  for (auto& b : raw)
    b = static_cast<unsigned char>(rng());
  return proto::to_hex(raw.data(), raw.size());
}

keypair random_keypair() {
  keypair k;
  k.secret = random_hex(32);
  k.pubkey = proto::pubkey_of(k.secret);
  return k;
}

std::string filler(size_t bytes, uint64_t seed) {
  static constexpr std::string_view words[] = {
    "ship", "the", "build", "review", "later", "standup", "deploy", "coffee", "bug",
    "merge", "ticket", "release", "green", "lunch", "please", "agent", "thread", "done"};
  std::mt19937_64 rng{seed};
  std::string out;
  out.reserve(bytes + 16);
  while (out.size() < bytes) {
    if (!out.empty())
      out += ' ';
    out += words[rng() % std::size(words)];
  }
  out.resize(bytes);
  return out;
}

std::string topic_word(size_t rank) {
  static constexpr std::string_view consonants = "bdfgklmnprstvz", vowels = "aeiou";
  constexpr size_t syllables = consonants.size() * vowels.size();
  // A bijection on 0..syllables^3 (7919 is prime to 70^3), so neighbouring
  // ranks do not share their first syllables.
  size_t n = ((rank - 1) * 7919) % (syllables * syllables * syllables);
  std::string out;
  for (int k = 0; k < 3; ++k, n /= syllables) {
    out += consonants[(n % syllables) / vowels.size()];
    out += vowels[n % vowels.size()];
  }
  return out;
}

std::vector<prepared_event> sign_all(size_t count, size_t threads, const event_maker& make) {
  std::vector<prepared_event> out(count);
  threads = std::max<size_t>(1, std::min(threads, count));
  std::vector<std::thread> pool;
  for (size_t t = 0; t < threads; ++t)
    pool.emplace_back([&, t] {
      for (size_t i = t; i < count; i += threads) {
        const keypair* signer = nullptr;
        auto ev = make(i, signer);
        proto::sign(ev, signer->secret);
        out[i].id = ev.id;
        out[i].frame.reserve(ev.raw.size() + 12);
        out[i].frame.append("[\"EVENT\",").append(ev.raw).append("]");
      }
    });
  for (auto& th : pool)
    th.join();
  return out;
}

std::string auth_frame(const keypair& key, std::string_view challenge, const std::string& relay_url) {
  proto::event ev;
  ev.kind = 22242;
  ev.created_at = unix_now();
  ev.tags = {{"relay", relay_url}, {"challenge", std::string{challenge}}};
  proto::sign(ev, key.secret);
  std::string frame;
  frame.append("[\"AUTH\",").append(ev.raw).append("]");
  return frame;
}

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
           std::chrono::steady_clock::now().time_since_epoch())
    .count();
}

int64_t unix_now() {
  return std::chrono::duration_cast<std::chrono::seconds>(
           std::chrono::system_clock::now().time_since_epoch())
    .count();
}

publish_clock::publish_clock(const std::vector<prepared_event>& events)
    : sent_(new std::atomic<int64_t>[events.size()]),
      accepted_at_(new std::atomic<int64_t>[events.size()]),
      size_(events.size()) {
  index_.reserve(events.size());
  for (size_t i = 0; i < events.size(); ++i) {
    index_.emplace(events[i].id, static_cast<uint32_t>(i));
    sent_[i].store(0, std::memory_order_relaxed);
    accepted_at_[i].store(0, std::memory_order_relaxed);
  }
}

int64_t publish_clock::index_of(std::string_view id) const {
  auto i = index_.find(id);
  return i == index_.end() ? -1 : static_cast<int64_t>(i->second);
}

}  // namespace waggle::bench
