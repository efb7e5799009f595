// The load tool's stand-in operator listener and its accounting: a listener
// benchmark is only as honest as its receipt times and its matching of
// receipts to the mentions the relay accepted.

#include <gtest/gtest.h>

#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http.hpp>

#include "bench/load/listener_run.hpp"
#include "bench/load/listeners.hpp"
#include "bench/load/options.hpp"

using namespace waggle::bench;
namespace http = boost::beast::http;

namespace {

std::string delivery_body(const std::string& event_id, const std::string& delivery_id) {
  return R"({"v":1,"delivery_id":")" + delivery_id +
         R"(","listener":"l","target":"t","community":"c","event":{"id":")" + event_id +
         R"(","kind":9}})";
}

// POSTs `body` to the receiver; the status, or 0 when no answer came within
// `wait` (asynchronous: a tcp_stream's deadline bounds asynchronous calls only).
unsigned post(uint16_t port, const std::string& body, std::chrono::milliseconds wait) {
  boost::asio::io_context ioc;
  boost::beast::tcp_stream stream{ioc};
  http::request<http::string_body> req{http::verb::post, "/wake", 11};
  req.set(http::field::host, "127.0.0.1");
  req.body() = body;
  req.prepare_payload();
  boost::beast::flat_buffer buf;
  http::response<http::string_body> res;
  unsigned status = 0;
  stream.expires_after(wait);
  stream.async_connect({boost::asio::ip::make_address("127.0.0.1"), port}, [&](auto ec) {
    if (ec)
      return;
    http::async_write(stream, req, [&](auto ec, size_t) {
      if (ec)
        return;
      http::async_read(stream, buf, res, [&](auto ec, size_t) {
        if (!ec)
          status = res.result_int();
      });
    });
  });
  ioc.run_for(wait + std::chrono::milliseconds(100));
  return status;
}

std::vector<prepared_event> some_events(size_t n) {
  auto key = random_keypair();
  return sign_all(n, 1, [&](size_t i, const keypair*& signer) {
    signer = &key;
    waggle::proto::event ev;
    ev.kind = 9;
    ev.created_at = 1'760'000'000;
    ev.content = filler(20, i);
    return ev;
  });
}

}  // namespace

TEST(ListenerReceiver, ParsesDeliveries) {
  std::string id, delivery;
  ASSERT_TRUE(parse_delivery(delivery_body("abc", "d-1"), id, delivery));
  EXPECT_EQ(id, "abc");
  EXPECT_EQ(delivery, "d-1");
  EXPECT_FALSE(parse_delivery("{}", id, delivery));
  EXPECT_FALSE(parse_delivery(R"({"delivery_id":"x","event":"y"})", id, delivery));
  EXPECT_FALSE(parse_delivery("not json", id, delivery));
}

TEST(ListenerReceiver, HealthyAnswersAndStalledNeverDoesBothRecord) {
  listener_receiver healthy{0, false};
  listener_receiver stalled{0, true};
  auto before = now_ns();
  EXPECT_EQ(post(healthy.port(), delivery_body("e1", "d1"), std::chrono::seconds(5)), 200u);
  EXPECT_EQ(post(stalled.port(), delivery_body("e2", "d2"), std::chrono::milliseconds(300)), 0u);
  auto got = healthy.receipts();
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].event_id, "e1");
  EXPECT_EQ(got[0].delivery_id, "d1");
  EXPECT_GE(got[0].at_ns, before);
  EXPECT_LE(got[0].at_ns, now_ns());
  // The stalled one read the request (it is recorded) but held the answer.
  for (int i = 0; i < 100 && stalled.requests() == 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  ASSERT_EQ(stalled.receipts().size(), 1u);
  EXPECT_EQ(stalled.receipts()[0].event_id, "e2");
  stalled.stop();
  healthy.stop();
}

TEST(ListenerRun, MatchesReceiptsToAcceptedMentionsOfTheirListener) {
  load_options o;
  o.kind = workload::listener_burst;
  o.listener_ports = {0, 0};  // any free ports; listener 1 stalled
  o.stalled_listeners = 1;
  listener_side side{o};
  ASSERT_TRUE(side.healthy(0));
  ASSERT_FALSE(side.healthy(1));

  auto events = some_events(6);
  publish_clock clock{events};
  // Events 0, 2, 4 mention listener 0's target; 1, 3 listener 1's; 5 nobody.
  std::vector<int> listener_of{0, 1, 0, 1, 0, -1};
  auto t0 = now_ns();
  for (size_t k = 0; k < 4; ++k)  // event 4 is never accepted
    clock.mark_accepted(k, t0);

  auto deliver = [&](size_t l, const std::string& id, const std::string& d) {
    return post(side.port(l), delivery_body(id, d), std::chrono::milliseconds(l ? 300 : 5000));
  };
  EXPECT_EQ(deliver(0, events[0].id, "a"), 200u);
  EXPECT_EQ(deliver(0, events[2].id, "b"), 200u);
  EXPECT_EQ(deliver(0, events[0].id, "a"), 200u);  // a retry of event 0
  EXPECT_EQ(deliver(0, events[1].id, "c"), 200u);  // listener 1's mention at listener 0
  EXPECT_EQ(deliver(0, events[4].id, "e"), 200u);  // not accepted: expected by nobody
  EXPECT_EQ(deliver(0, std::string(64, 'f'), "x"), 200u);  // not of this run
  EXPECT_EQ(deliver(1, events[1].id, "s"), 0u);    // stalled
  for (int i = 0; i < 100 && side.healthy_requests() < 6; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  side.stop();
  auto r = side.collect(clock, listener_of);
  EXPECT_EQ(r.listeners, 2u);
  EXPECT_EQ(r.stalled, 1u);
  EXPECT_EQ(r.expected, 2u);   // events 0 and 2 (accepted, for the healthy listener)
  EXPECT_EQ(r.delivered, 2u);
  EXPECT_EQ(r.missed, 0u);
  EXPECT_EQ(r.repeated, 1u);
  EXPECT_EQ(r.foreign, 2u);    // event 1 at the wrong listener, the unknown id
  EXPECT_EQ(r.stalled_requests, 1u);
  EXPECT_EQ(r.latency_ms.count, 2u);
  EXPECT_GT(r.latency_ms.p50, 0);
}

TEST(ListenerRun, CountsAMissingDelivery) {
  load_options o;
  o.listener_ports = {0};
  listener_side side{o};
  auto events = some_events(2);
  publish_clock clock{events};
  clock.mark_accepted(0, now_ns());
  clock.mark_accepted(1, now_ns());
  EXPECT_EQ(post(side.port(0), delivery_body(events[1].id, "b"), std::chrono::seconds(5)), 200u);
  side.stop();
  auto r = side.collect(clock, {0, 0});
  EXPECT_EQ(r.expected, 2u);
  EXPECT_EQ(r.delivered, 1u);
  EXPECT_EQ(r.missed, 1u);
}

TEST(ListenerOptions, KeysConfigAndRefusals) {
  EXPECT_EQ(listener_key(3).pubkey, listener_key(3).pubkey);
  EXPECT_NE(listener_key(3).pubkey, listener_key(4).pubkey);
  auto config = listener_config({4001, 4002});
  EXPECT_EQ(config, listener_key(0).pubkey + "=http://127.0.0.1:4001/wake," +
                      listener_key(1).pubkey + "=http://127.0.0.1:4002/wake");
  auto bad = [](std::vector<std::string> args) {
    return std::holds_alternative<std::string>(parse_load_options(std::move(args)));
  };
  EXPECT_TRUE(bad({"--workload", "listener-latency"}));  // no ports
  EXPECT_TRUE(bad({"--workload", "listener-burst", "--listener-ports", "1,2",
                   "--stalled-listeners", "2"}));        // nobody healthy
  EXPECT_TRUE(bad({"--workload", "listener-latency", "--listener-ports", "1",
                   "--connections", "2"}));
  EXPECT_TRUE(bad({"--workload", "publish", "--listener-ports", "1"}));
  EXPECT_TRUE(bad({"--workload", "chat", "--listener-ports", "1,x"}));
  auto o = std::get<load_options>(parse_load_options(
    {"--workload", "listener-burst", "--listener-ports", "7001,7002,7003", "--stalled-listeners=1"}));
  EXPECT_EQ(o.listener_ports, (std::vector<uint16_t>{7001, 7002, 7003}));
  EXPECT_EQ(o.mentions, 1000u);
  auto l = std::get<load_options>(
    parse_load_options({"--workload", "listener-latency", "--listener-ports", "7001"}));
  EXPECT_EQ(l.mentions, 20u);
}
