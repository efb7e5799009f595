// Live EVENT frames share their event's JSON (socket_sink.hpp, out_frame):
// what a client receives must be byte for byte what render_event renders.

#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "gateway/socket_sink.hpp"
#include "messages/proto/client_message.hpp"
#include "messages/proto/event.hpp"

using namespace waggle;

namespace {

out_frame shared_frame(const std::string& sub_id, const std::shared_ptr<const proto::event>& ev) {
  return {proto::render_event_head(sub_id), std::shared_ptr<const std::string>(ev, &ev->raw),
          proto::event_tail};
}

}  // namespace

TEST(out_frame, shared_event_frames_are_byte_identical_to_render_event) {
  auto ev = std::make_shared<proto::event>();
  ev->raw = R"({"id":"ab","content":"hé \"quoted\" \\ \n","tags":[["h","c"]]})";
  const std::shared_ptr<const proto::event> shared = ev;
  const std::vector<std::string> sub_ids = {
    "a", "", "sub with \"quotes\"", "back\\slash", std::string("ctl\x01\x1f", 5), "ünï",
    std::string(64, 'z')};
  for (const auto& sub : sub_ids) {
    auto f = shared_frame(sub, shared);
    const auto want = proto::render_event(sub, ev->raw);
    EXPECT_EQ(f.flatten(), want) << sub;
    EXPECT_EQ(f.size(), want.size()) << sub;  // what the outbound caps count
  }
}

TEST(out_frame, frames_hold_the_event_without_copying_it) {
  auto ev = std::make_shared<proto::event>();
  ev->raw = std::string(1000, 'e');
  const std::shared_ptr<const proto::event> shared = ev;
  auto a = shared_frame("a", shared);
  auto b = shared_frame("b", shared);
  EXPECT_EQ(a.shared.get(), &ev->raw);
  EXPECT_EQ(b.shared.get(), &ev->raw);
  ev.reset();
  // The frames alone keep the event alive until they are written.
  EXPECT_EQ(a.flatten(), proto::render_event("a", std::string(1000, 'e')));
}

TEST(out_frame, plain_frames_are_their_text) {
  out_frame f{std::string{R"(["NOTICE","x"])"}};
  EXPECT_EQ(f.flatten(), R"(["NOTICE","x"])");
  EXPECT_EQ(f.size(), f.text.size());
}

// A sink that only knows strings receives shared frames flattened.
TEST(out_frame, string_sinks_receive_the_flattened_frame) {
  struct strings_only : socket_sink {
    std::vector<std::string> got;
    void send_text(std::string frame) override { got.push_back(std::move(frame)); }
    void close(uint16_t, std::string) override {}
  } sink;
  auto raw = std::make_shared<const std::string>("{}");
  sink.send_frame(out_frame{proto::render_event_head("s"), raw, proto::event_tail});
  sink.send_frame(out_frame{std::string{"plain"}});
  EXPECT_EQ(sink.got, (std::vector<std::string>{R"(["EVENT","s",{}])", "plain"}));
}
