#pragma once

// Events for the channel tests (tests/pg/channel_*_test.cpp): signed NIP-29
// commands and channel posts by the test signers of pg_fixture.hpp.

#include <atomic>
#include <ctime>
#include <string>
#include <vector>

#include "messages/proto/nip29.hpp"
#include "tests/pg/pg_fixture.hpp"

namespace waggle::pgtest {

inline std::string pk(int n) { return proto::pubkey_of(secret(n)); }

// A fresh created_at for every event, so no two commands share an id (and
// all stay inside the relay's created_at window).
inline int64_t fresh_time() {
  static std::atomic<int64_t> n{0};
  return static_cast<int64_t>(std::time(nullptr)) - 100000 + n++;
}

inline proto::event command(int signer, int32_t kind, std::vector<proto::tag> tags) {
  return make_event(signer, kind, fresh_time(), std::move(tags));
}

inline proto::event post(int author, const std::string& channel, const std::string& text) {
  return make_event(author, 9, fresh_time(), {{"h", channel}}, text);
}

}  // namespace waggle::pgtest
