// The per-event CPU costs of the write path on one core (Google Benchmark):
// BIP-340 verification bounds what one core can accept, and parsing plus id
// recomputation is what the connection actor does before it. The benchmark
// script reports the relay's events/s as a ratio to BM_verify_signature.

#include <benchmark/benchmark.h>

#include <random>
#include <string>
#include <vector>

#include "messages/proto/event.hpp"

using namespace waggle;

namespace {

std::string secret_hex(uint64_t seed) {
  std::mt19937_64 rng{seed};
  unsigned char raw[32];
  for (auto& b : raw)
    b = static_cast<unsigned char>(rng());
  raw[0] |= 1;  // never zero
  return proto::to_hex(raw, sizeof raw);
}

// A realistic chat post: kind 9, a channel tag, a mention, 200 bytes of text.
std::vector<proto::event> signed_posts(size_t n) {
  std::vector<proto::event> out;
  for (size_t i = 0; i < n; ++i) {
    proto::event ev;
    ev.kind = 9;
    ev.created_at = 1'760'000'000 + static_cast<int64_t>(i);
    ev.tags = {{"h", "general"}, {"p", std::string(64, 'a')}};
    ev.content = std::string(200, static_cast<char>('a' + i % 26));
    proto::sign(ev, secret_hex(i + 1));
    out.push_back(std::move(ev));
  }
  return out;
}

const std::vector<proto::event>& posts() {
  static const auto p = signed_posts(256);
  return p;
}

void BM_verify_signature(benchmark::State& state) {
  auto& events = posts();
  size_t i = 0;
  for (auto _ : state) {
    bool ok = proto::verify_signature(events[i++ % events.size()]);
    benchmark::DoNotOptimize(ok);
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations()));
}
BENCHMARK(BM_verify_signature);

void BM_parse_event(benchmark::State& state) {
  auto& events = posts();
  size_t i = 0;
  for (auto _ : state) {
    auto parsed = proto::parse_event(events[i++ % events.size()].raw);
    benchmark::DoNotOptimize(parsed);
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations()));
}
BENCHMARK(BM_parse_event);

void BM_compute_id(benchmark::State& state) {
  auto& events = posts();
  size_t i = 0;
  for (auto _ : state) {
    auto id = proto::compute_id(events[i++ % events.size()]);
    benchmark::DoNotOptimize(id);
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations()));
}
BENCHMARK(BM_compute_id);

void BM_sign(benchmark::State& state) {
  auto ev = posts()[0];
  auto secret = secret_hex(7);
  for (auto _ : state) {
    ++ev.created_at;
    proto::sign(ev, secret);
    benchmark::DoNotOptimize(ev.sig);
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations()));
}
BENCHMARK(BM_sign);

}  // namespace

BENCHMARK_MAIN();
