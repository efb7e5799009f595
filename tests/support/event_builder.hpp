#pragma once

// The one way tests make signed events: every field named, the rest left at
// a sensible default, then signed (id and sig computed) by proto::sign.
//   auto ev = test::event_builder{alice_sk}.kind(9).tag({"h", "general"}).content("hi").sign();
// Fixtures keep their short helpers (make_event, signed_event), written over this.

#include <cstdint>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "messages/proto/event.hpp"

namespace waggle::test {

// A valid secp256k1 secret key: the 32-byte big-endian number n (n >= 1), in hex.
inline std::string secret(int n) {
  char buf[65];
  std::snprintf(buf, sizeof buf, "%064x", n);
  return buf;
}

class event_builder {
 public:
  explicit event_builder(std::string secret_hex) : secret_(std::move(secret_hex)) {}

  event_builder& kind(int32_t k) {
    ev_.kind = k;
    return *this;
  }
  event_builder& at(int64_t created_at) {
    ev_.created_at = created_at;
    return *this;
  }
  event_builder& content(std::string text) {
    ev_.content = std::move(text);
    return *this;
  }
  event_builder& tags(std::vector<proto::tag> all) {
    ev_.tags = std::move(all);
    return *this;
  }
  event_builder& tag(proto::tag t) {
    ev_.tags.push_back(std::move(t));
    return *this;
  }

  proto::event sign() const {
    auto ev = ev_;
    proto::sign(ev, secret_);
    return ev;
  }

 private:
  std::string secret_;
  proto::event ev_ = [] {
    proto::event e;
    e.kind = 1;
    e.created_at = 1'700'000'000;
    return e;
  }();
};

}  // namespace waggle::test
