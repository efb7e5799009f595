#pragma once

// The fixture of the write-path tests (tests/db/event_*_test.cpp).

#include "tests/support/pg_fixture.hpp"

namespace waggle::pgtest {

class WriteTest : public PgTest {
 protected:
  std::vector<write_result> write(int64_t community_id, const std::vector<proto::event>& evs) {
    return db::write_batch(conn(), batch(community_id, evs));
  }
  write_outcome write1(int64_t community_id, const proto::event& ev) {
    auto r = write(community_id, {ev});
    return r.at(0).outcome;
  }
  std::vector<std::string> query(int64_t community_id, const proto::filter& f) {
    return db::query_events(conn(), community_id, {f}, proto::filter_limits{}, wall_now());
  }
};

// Two versions with the same created_at, returned (lower id, higher id).
inline std::pair<proto::event, proto::event> tie_pair(int signer, int32_t kind, int64_t created_at,
                                               std::vector<proto::tag> tags = {}) {
  auto a = make_event(signer, kind, created_at, tags, "version a");
  auto b = make_event(signer, kind, created_at, tags, "version b");
  if (b.id < a.id)
    std::swap(a, b);
  return {a, b};
}

}  // namespace waggle::pgtest
