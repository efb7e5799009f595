// NIP-40 in the fanout hub: an event that has expired by the time its
// committed_events reaches the hub is not fanned out; one that expires later
// (or never) is. Under test_coordinator with a fixed wall clock.

#include "actors/fanout/hub_actor.hpp"
#include "tests/actors/actor_fixture.hpp"

using namespace waggle;
using namespace waggle::testing;

namespace {

constexpr int64_t now = 1'700'000'000;

struct received {
  std::vector<std::string> contents;
};

event_ptr event_with(std::string content, std::vector<proto::tag> tags) {
  proto::event ev;
  ev.kind = 1;
  ev.created_at = now;
  ev.content = std::move(content);
  ev.tags = std::move(tags);
  proto::sign(ev, std::string(64, '1'));
  return std::make_shared<const proto::event>(std::move(ev));
}

class hub_expiry_test : public actor_test {};

TEST_F(hub_expiry_test, an_event_expired_at_commit_is_not_fanned_out) {
  auto hub = spawn(hub_actor_impl, test_env(now));
  auto log = std::make_shared<received>();
  auto conn = spawn(stand_in_connection,
                    [log](const live_event& ev) { log->contents.push_back(ev.ev->content); });
  caf::anon_send(hub, hub_subscribe{conn, 1, "s", 1, {proto::filter{}}});
  run();
  committed_events batch;
  for (auto& [content, tags] : std::vector<std::pair<std::string, std::vector<proto::tag>>>{
         {"plain", {}},
         {"later", {{"expiration", std::to_string(now + 1)}}},
         {"expired", {{"expiration", std::to_string(now - 1)}}},
         {"this-second", {{"expiration", std::to_string(now)}}},
         {"malformed", {{"expiration", "soon"}}},
         {"first-tag-counts", {{"expiration", std::to_string(now + 60)},
                               {"expiration", std::to_string(now - 60)}}},
       })
    batch.items.push_back({1, event_with(content, tags)});
  caf::anon_send(hub, std::move(batch));
  run();
  EXPECT_EQ(log->contents, (std::vector<std::string>{"plain", "later", "first-tag-counts"}));
}

}  // namespace
