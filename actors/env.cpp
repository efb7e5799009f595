#include "actors/env.hpp"

#include <chrono>

#include <openssl/rand.h>

#include "messages/proto/event.hpp"

namespace waggle {

node_env node_env::production() {
  node_env env;
  env.unix_now = [] {
    using namespace std::chrono;
    return duration_cast<seconds>(system_clock::now().time_since_epoch()).count();
  };
  env.random_challenge = [] {
    unsigned char buf[16];
    if (RAND_bytes(buf, sizeof(buf)) != 1)
      throw std::runtime_error("RAND_bytes failed");
    return proto::to_hex(buf, sizeof(buf));
  };
  env.stats = std::make_shared<waggle::metrics>();
  return env;
}

}  // namespace waggle
