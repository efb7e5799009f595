#include "bench/load/seed.hpp"

#include <algorithm>
#include <iostream>
#include <random>
#include <thread>

#include <boost/asio/executor_work_guard.hpp>
#include <pqxx/pqxx>

#include "bench/load/events.hpp"
#include "bench/load/setup.hpp"
#include "db/community_store.hpp"
#include "db/batch_bisect.hpp"
#include "db/event_store.hpp"

namespace waggle::bench {

namespace {

constexpr size_t batch_size = 2000;

// Cumulative Zipf weights (1/rank) of the topic words, normalised to 1.
std::vector<double> topic_cdf() {
  std::vector<double> cdf(topic_words);
  double sum = 0;
  for (size_t r = 1; r <= topic_words; ++r)
    cdf[r - 1] = sum += 1.0 / static_cast<double>(r);
  for (auto& c : cdf)
    c /= sum;
  return cdf;
}

// Event k's text: filler's common words, ending in one topic word drawn by
// Zipf's law (deterministic in k), `bytes` long in all.
std::string seed_content(size_t bytes, size_t k, const std::vector<double>& cdf) {
  std::mt19937_64 rng{k * 0x9E3779B97F4A7C15ull + 1};
  auto u = std::uniform_real_distribution<double>{0, 1}(rng);
  auto rank = static_cast<size_t>(std::lower_bound(cdf.begin(), cdf.end(), u) - cdf.begin()) + 1;
  auto word = topic_word(std::min(rank, topic_words));
  if (bytes <= word.size() + 1)
    return word;
  return filler(bytes - word.size() - 1, k) + " " + word;
}

std::string channels_text(const seed_options& o) {
  return std::to_string(o.channels) + " channels " + o.channel_prefix + "-0.." + o.channel_prefix +
         "-" + std::to_string(o.channels - 1);
}

}  // namespace

int run_seed(const seed_options& o) {
  relay_endpoint relay;
  if (auto e = resolve_relay(o.url, o.host, relay); !e.empty()) {
    std::cerr << "waggle-load seed: " << e << "\n";
    return 2;
  }
  pqxx::connection conn{o.database_url};
  auto host = normalize_host(relay.target.host_header);
  int64_t community_id = 0;
  for (auto& c : db::load_communities(conn))
    if (c.host == host)
      community_id = c.id;
  if (!community_id) {
    std::cerr << "waggle-load seed: no community for host " << host << "\n";
    return 2;
  }

  std::vector<keypair> authors(o.authors);
  for (auto& a : authors)
    a = random_keypair();
  std::vector<std::string> ids, members;
  for (size_t k = 0; k < o.channels; ++k)
    ids.push_back(o.channel_prefix + "-" + std::to_string(k));
  for (auto& a : authors)
    members.push_back(a.pubkey);
  {
    boost::asio::io_context ioc;
    auto guard = boost::asio::make_work_guard(ioc);
    std::thread io{[&] { ioc.run(); }};
    auto failure = create_channels(relay, ioc, random_keypair(), ids, members);
    guard.reset();
    ioc.stop();
    io.join();
    if (!failure.empty()) {
      std::cerr << "waggle-load seed: " << failure
                << " (channel ids are never reused: pick another --channel-prefix)\n";
      return 2;
    }
  }

  auto cdf = topic_cdf();
  // Spread over the last 30 days, oldest first, as a team's history would be.
  auto now = unix_now();
  auto span = int64_t{30} * 86400;
  size_t written = 0;
  auto started = std::chrono::steady_clock::now();
  for (size_t at = 0; at < o.events; at += batch_size) {
    auto n = std::min(batch_size, o.events - at);
    auto batch = sign_all(n, o.threads, [&](size_t i, const keypair*& signer) {
      auto k = at + i;
      signer = &authors[k % authors.size()];
      proto::event ev;
      ev.kind = 9;
      ev.created_at = now - span + static_cast<int64_t>(k * span / std::max<size_t>(1, o.events));
      ev.tags = {{"h", ids[(k * 2654435761u) % ids.size()]}};
      ev.content = seed_content(o.content_bytes, k, cdf);
      return ev;
    });
    std::vector<ingest_item> items;
    items.reserve(n);
    for (auto& prepared : batch) {
      auto parsed = proto::parse_event(std::string_view{prepared.frame}.substr(9, prepared.frame.size() - 10));
      if (!parsed) {
        std::cerr << "waggle-load seed: internal error: " << parsed.error().reason << "\n";
        return 1;
      }
      items.push_back({community_id, std::make_shared<const proto::event>(std::move(*parsed))});
    }
    auto results = db::write_batch_bisecting(conn, items);
    for (auto& r : results)
      if (r.outcome == write_outcome::stored)
        ++written;
      else if (r.outcome != write_outcome::duplicate) {
        std::cerr << "waggle-load seed: an event was not stored: " << r.reason << "\n";
        return 1;
      }
    if ((at / batch_size) % 25 == 0) {
      auto secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
      std::cerr << "seeded " << written << " of " << o.events << " (" << static_cast<int>(secs)
                << " s)\n";
    }
  }
  pqxx::nontransaction{conn}.exec("ANALYZE events");
  std::cout << "seeded " << written << " events into " << channels_text(o) << " of " << host
            << "\n";
  return 0;
}

}  // namespace waggle::bench
