#include "actors/support/env.hpp"

#include <chrono>

#include <openssl/rand.h>

#include "actors/trace/trace_recorder.hpp"
#include "messages/proto/event.hpp"

namespace waggle {

int64_t node_env::unix_now() const {
  if (trace)
    return trace->unix_now(actor, sources.unix_now);
  return sources.unix_now();
}

std::string node_env::random_challenge() const {
  if (trace)
    return trace->random_challenge(actor, sources.random_challenge);
  return sources.random_challenge();
}

steady_time node_env::steady_now() const {
  if (trace)
    return trace->steady_now(actor, sources.steady_now);
  return sources.steady_now();
}

node_env node_env::production() {
  node_env env;
  env.sources.unix_now = [] {
    using namespace std::chrono;
    return duration_cast<seconds>(system_clock::now().time_since_epoch()).count();
  };
  env.sources.random_challenge = [] {
    unsigned char buf[16];
    if (RAND_bytes(buf, sizeof(buf)) != 1)
      throw std::runtime_error("RAND_bytes failed");
    return proto::to_hex(buf, sizeof(buf));
  };
  env.sources.steady_now = [] { return std::chrono::steady_clock::now(); };
  env.stats = std::make_shared<waggle::metrics>();
  return env;
}

}  // namespace waggle
