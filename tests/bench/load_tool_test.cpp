// The load tool's own arithmetic and parsing: a benchmark is only as honest
// as its percentiles and its reading of the relay's answers.

#include <unistd.h>

#include <cstring>

#include <gtest/gtest.h>

#include "bench/load/client.hpp"
#include "bench/load/cpu_meter.hpp"
#include "bench/load/events.hpp"
#include "bench/load/options.hpp"
#include "bench/load/report.hpp"
#include "bench/load/stats.hpp"
#include "bench/load/ws_conn.hpp"

using namespace waggle::bench;

TEST(LoadStats, NearestRankPercentiles) {
  std::vector<double> samples;
  for (int i = 100; i >= 1; --i)
    samples.push_back(i);
  auto s = summarize_latency(samples);
  EXPECT_EQ(s.count, 100u);
  EXPECT_EQ(s.p50, 50);
  EXPECT_EQ(s.p90, 90);
  EXPECT_EQ(s.p99, 99);
  EXPECT_EQ(s.max, 100);
  EXPECT_DOUBLE_EQ(s.mean, 50.5);
  std::vector<double> one{7};
  EXPECT_EQ(summarize_latency(one).p99, 7);
  std::vector<double> none;
  EXPECT_EQ(summarize_latency(none).count, 0u);
}

TEST(LoadStats, MedianOfOddAndEvenCounts) {
  EXPECT_EQ(median({3, 1, 2}), 2);
  EXPECT_EQ(median({4, 1, 3, 2}), 2.5);
  EXPECT_EQ(median({}), 0);
}

TEST(LoadClient, ParsesRelayMessages) {
  relay_message m;
  ASSERT_TRUE(parse_relay_message(R"(["OK","abc",false,"invalid: bad signature"])", m));
  EXPECT_EQ(m.verb, "OK");
  EXPECT_EQ(m.sub_or_id, "abc");
  EXPECT_FALSE(m.accepted);
  EXPECT_EQ(m.message, "invalid: bad signature");

  std::string id(64, 'e');
  std::string frame = R"(["EVENT","live",{"id":")" + id + R"(","pubkey":"p","kind":9}])";
  ASSERT_TRUE(parse_relay_message(frame, m));
  EXPECT_EQ(m.verb, "EVENT");
  EXPECT_EQ(m.sub_or_id, "live");
  EXPECT_EQ(m.event_id, id);

  ASSERT_TRUE(parse_relay_message(R"(["EOSE","q7"])", m));
  EXPECT_EQ(m.sub_or_id, "q7");
  ASSERT_TRUE(parse_relay_message(R"(["CLOSED","q1","restricted: not a member"])", m));
  EXPECT_EQ(m.message, "restricted: not a member");
  ASSERT_TRUE(parse_relay_message(R"(["AUTH","00ff"])", m));
  EXPECT_EQ(m.sub_or_id, "00ff");

  EXPECT_FALSE(parse_relay_message("not json", m));
  EXPECT_FALSE(parse_relay_message(R"(["EVENT","s",{"id":"short"}])", m));
  EXPECT_FALSE(parse_relay_message("{}", m));
}

TEST(LoadClient, ParsesWsUrls) {
  auto t = parse_ws_url("ws://127.0.0.1:7777");
  ASSERT_TRUE(t);
  EXPECT_EQ(t->host, "127.0.0.1");
  EXPECT_EQ(t->port, 7777);
  EXPECT_EQ(t->host_header, "127.0.0.1:7777");
  EXPECT_EQ(t->path, "/");
  auto p = parse_ws_url("ws://relay.example/chat");
  ASSERT_TRUE(p);
  EXPECT_EQ(p->port, 80);
  EXPECT_EQ(p->path, "/chat");
  EXPECT_FALSE(parse_ws_url("http://x:1"));
  EXPECT_FALSE(parse_ws_url("ws://x:99999"));
  EXPECT_FALSE(parse_ws_url("ws://:80"));
}

namespace {

// A server frame (unmasked) as the relay writes it.
std::string server_frame(uint8_t first_byte, std::string_view payload) {
  std::string out(1, static_cast<char>(first_byte));
  auto n = payload.size();
  if (n < 126) {
    out.push_back(static_cast<char>(n));
  } else if (n <= 0xffff) {
    out.push_back(126);
    out.push_back(static_cast<char>(n >> 8));
    out.push_back(static_cast<char>(n & 0xff));
  } else {
    out.push_back(127);
    for (int i = 7; i >= 0; --i)
      out.push_back(static_cast<char>((static_cast<uint64_t>(n) >> (8 * i)) & 0xff));
  }
  return out + std::string{payload};
}

void feed(ws_frame_reader& r, std::string_view bytes) {
  std::memcpy(r.space(bytes.size()), bytes.data(), bytes.size());
  r.filled(bytes.size());
}

}  // namespace

TEST(LoadFrames, ReadsEveryWholeFrameAndWaitsForTheRest) {
  ws_frame_reader r{1u << 20};
  std::string big(70000, 'x');  // a 64-bit length
  std::string mid(300, 'm');    // a 16-bit length
  auto bytes = server_frame(0x81, "one") + server_frame(0x89, "ping!") + server_frame(0x81, mid)
               + server_frame(0x8A, "pong") + server_frame(0x81, big);
  // Byte by byte: every frame comes out whole, once, in order, whatever the cut.
  std::vector<std::string> texts;
  std::vector<std::string> pings;
  for (char c : bytes) {
    feed(r, std::string_view{&c, 1});
    while (auto f = r.next()) {
      ASSERT_NE(f->what, ws_frame_reader::kind::error) << r.error();
      (f->what == ws_frame_reader::kind::ping ? pings : texts).emplace_back(f->payload);
    }
  }
  ASSERT_EQ(texts.size(), 3u);
  EXPECT_EQ(texts[0], "one");
  EXPECT_EQ(texts[1], mid);
  EXPECT_EQ(texts[2], big);
  ASSERT_EQ(pings.size(), 1u);
  EXPECT_EQ(pings[0], "ping!");
}

TEST(LoadFrames, JoinsFragmentsAndRefusesWhatAServerMustNotSend) {
  ws_frame_reader r{100};
  feed(r, server_frame(0x01, "frag") + server_frame(0x89, "p") + server_frame(0x80, "mented"));
  auto ping = r.next();
  ASSERT_TRUE(ping);
  EXPECT_EQ(ping->what, ws_frame_reader::kind::ping);
  auto text = r.next();
  ASSERT_TRUE(text);
  EXPECT_EQ(text->payload, "fragmented");
  EXPECT_FALSE(r.next());

  auto refused = [](std::string bytes) {
    ws_frame_reader r{100};
    feed(r, bytes);
    auto f = r.next();
    return f && f->what == ws_frame_reader::kind::error;
  };
  EXPECT_TRUE(refused(server_frame(0x81, std::string(101, 'x'))));  // over the limit
  auto masked = server_frame(0x81, "abcd");
  masked[1] = static_cast<char>(masked[1] | 0x80);
  EXPECT_TRUE(refused(masked));
  EXPECT_TRUE(refused(server_frame(0xC1, "x")));  // RSV1 without an extension
  EXPECT_TRUE(refused(server_frame(0x80, "x")));  // continuation of nothing
  EXPECT_TRUE(refused(server_frame(0x83, "x")));  // reserved opcode
}

TEST(LoadFrames, ClientFramesAreMaskedAndCarryTheirLength) {
  std::string payload(300, 'a');
  auto f = ws_client_frame(0x1, payload, 0x04030201u);
  ASSERT_EQ(f.size(), 2u + 2u + 4u + 300u);
  EXPECT_EQ(static_cast<unsigned char>(f[0]), 0x81);
  EXPECT_EQ(static_cast<unsigned char>(f[1]), 0x80 | 126);
  EXPECT_EQ((static_cast<unsigned char>(f[2]) << 8) | static_cast<unsigned char>(f[3]), 300);
  for (size_t i = 0; i < payload.size(); ++i)
    ASSERT_EQ(static_cast<char>(f[8 + i] ^ f[4 + (i & 3)]), 'a');
}

TEST(LoadOptions, RejectsWhatCannotBeRun) {
  EXPECT_TRUE(std::holds_alternative<load_options>(parse_load_options({"--in-flight", "50"})));
  EXPECT_TRUE(std::holds_alternative<std::string>(parse_load_options({"--in-flight", "0"})));
  EXPECT_TRUE(std::holds_alternative<std::string>(parse_load_options({"--rate", "fast"})));
  EXPECT_TRUE(std::holds_alternative<std::string>(parse_load_options({"--workload", "fanout"})));
  EXPECT_TRUE(std::holds_alternative<std::string>(parse_load_options({"--workload", "history"})));
  EXPECT_TRUE(std::holds_alternative<std::string>(parse_load_options({"--bogus"})));
  auto o = std::get<load_options>(
    parse_load_options({"--workload=chat", "--mention-share", "0.5", "--rate=100"}));
  EXPECT_EQ(o.kind, workload::chat);
  EXPECT_EQ(o.mention_share, 0.5);
  EXPECT_EQ(o.rate, 100);
}

TEST(LoadOptions, SpreadsOverTheNodesOfACluster) {
  auto one = std::get<load_options>(parse_load_options({"--url", "ws://127.0.0.1:7001"}));
  EXPECT_EQ(one.url, "ws://127.0.0.1:7001");
  EXPECT_EQ(one.urls, std::vector<std::string>{"ws://127.0.0.1:7001"});
  EXPECT_EQ(one.subscriber_urls, one.urls);  // subscribers default to the publishers' nodes
  auto three = std::get<load_options>(parse_load_options(
    {"--url=ws://127.0.0.1:7001,ws://127.0.0.1:7002,ws://127.0.0.1:7003", "--subscriber-url",
     "ws://127.0.0.1:7002"}));
  EXPECT_EQ(three.url, "ws://127.0.0.1:7001");  // set-up goes through the first
  EXPECT_EQ(three.urls.size(), 3u);
  EXPECT_EQ(three.urls[2], "ws://127.0.0.1:7003");
  EXPECT_EQ(three.subscriber_urls, std::vector<std::string>{"ws://127.0.0.1:7002"});
  // A list item that is not a ws:// URL, an empty one, and a list where one relay is measured.
  EXPECT_TRUE(std::holds_alternative<std::string>(
    parse_load_options({"--url", "ws://127.0.0.1:7001,http://x:1"})));
  EXPECT_TRUE(std::holds_alternative<std::string>(
    parse_load_options({"--url", "ws://127.0.0.1:7001,"})));
  EXPECT_TRUE(std::holds_alternative<std::string>(
    parse_load_options({"--subscriber-url", "ws://127.0.0.1:7002", "--workload", "push",
                        "--push-scenario", "A", "--push-gateway-port", "9"})));
  EXPECT_TRUE(std::holds_alternative<std::string>(
    parse_load_options({"--url", "ws://127.0.0.1:7001,ws://127.0.0.1:7002", "--workload",
                        "fanout", "--sweep", "10,100"})));
}

TEST(LoadOptions, CpuWatchesNameProcessesAndTheirChildren) {
  auto w = parse_cpu_watches("node0=12,pg=34+");
  ASSERT_TRUE(w.has_value());
  ASSERT_EQ(w->size(), 2u);
  EXPECT_EQ((*w)[0].name, "node0");
  EXPECT_EQ((*w)[0].pid, 12);
  EXPECT_FALSE((*w)[0].children);
  EXPECT_EQ((*w)[1].name, "pg");
  EXPECT_EQ((*w)[1].pid, 34);
  EXPECT_TRUE((*w)[1].children);
  for (const char* bad : {"", "node0", "=12", "node0=", "node0=12x", "node0=+", "a=1,", "tool=1",
                          "machine_busy=2", "a/b=1", "a=0"})
    EXPECT_FALSE(parse_cpu_watches(bad).has_value()) << bad;
  EXPECT_TRUE(std::holds_alternative<std::string>(parse_load_options({"--cpu-watch", "x=1,y"})));
  auto o = std::get<load_options>(parse_load_options({"--cpu-watch", "x=1,y=2+"}));
  EXPECT_EQ(o.cpu_watch, "x=1,y=2+");
  // This process is watched over a moment: the figures are there, in order.
  auto self = parse_cpu_watches("me=" + std::to_string(::getpid()));
  auto a = cpu_now(*self), b = cpu_now(*self);
  auto c = cpu_between(*self, a, b);
  ASSERT_EQ(c.size(), 3u);
  EXPECT_EQ(c[0].first, "me");
  EXPECT_EQ(c[1].first, "tool");
  EXPECT_EQ(c[2].first, "machine_busy");
}

TEST(LoadReport, SummaryTakesMediansOfEveryResult) {
  auto run = [](double per_s, double p99, size_t accepted) {
    run_result r;
    r.options.label = "x";
    r.outcomes.sent = r.outcomes.accepted = accepted;
    r.per_s = per_s;
    r.ack_ms.p99 = p99;
    return to_json(r);
  };
  auto s = summarize_runs({run(100, 9, 10), run(300, 1, 30), run(200, 5, 20)}, "");
  ASSERT_TRUE(s.error.empty()) << s.error;
  EXPECT_EQ(s.medians.at("per_s"), 200);
  EXPECT_EQ(s.medians.at("latency_ms/p99"), 5);
  EXPECT_EQ(s.medians.at("accepted"), 20);
  EXPECT_NE(s.json.find("\"runs\": 3"), std::string::npos);
  EXPECT_FALSE(summarize_runs({"{}"}, "").error.empty());
}

TEST(LoadEvents, SignedFramesVerify) {
  auto key = random_keypair();
  auto events = sign_all(20, 2, [&](size_t i, const keypair*& signer) {
    signer = &key;
    waggle::proto::event ev;
    ev.kind = 1;
    ev.created_at = 1'760'000'000;
    ev.content = filler(50, i);
    return ev;
  });
  ASSERT_EQ(events.size(), 20u);
  for (auto& e : events) {
    ASSERT_EQ(e.frame.rfind("[\"EVENT\",{", 0), 0u);
    auto parsed = waggle::proto::parse_event(std::string_view{e.frame}.substr(9, e.frame.size() - 10));
    ASSERT_TRUE(parsed);
    EXPECT_EQ(parsed->id, e.id);
    EXPECT_TRUE(waggle::proto::verify_signature(*parsed));
  }
  publish_clock clock{events};
  EXPECT_EQ(clock.index_of(events[7].id), 7);
  EXPECT_EQ(clock.index_of(std::string(64, '0')), -1);
  EXPECT_EQ(filler(37, 1).size(), 37u);
}
