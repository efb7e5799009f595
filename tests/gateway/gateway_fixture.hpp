#pragma once

// The fixture of the gateway tests gateway_http_test.cpp and
// gateway_websocket_test.cpp: the gateway against a fake node, a real server on
// an ephemeral port, a CAF actor system with echo actors as connection actors,
// and the gateway's own synchronous clients.

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <mutex>
#include <thread>

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/write.hpp>
#include <caf/all.hpp>
#include <gtest/gtest.h>

#include "messages/outcome.hpp"
#include "messages/proto/nip98.hpp"
#include "gateway/server.hpp"
#include "gateway/ws_session.hpp"
#include "gateway/ws_client.hpp"
#include "messages/proto/event.hpp"
#include "messages/fanout.hpp"
#include "messages/register_types.hpp"

namespace waggle::gateway::test_support {

using namespace std::chrono_literals;

constexpr const char* relay_host = "relay.test";
const std::string nip11_doc = R"({"name":"Test Relay","supported_nips":[1,11,98]})";
constexpr int burst_senders = 4;
constexpr int burst_frames = 3000;
constexpr int backlog_frames = 3;
constexpr size_t backlog_bytes = 2500 * 1024;  // 3 frames: under the 8 MiB queue cap

template <class Pred>
bool eventually(Pred p, std::chrono::milliseconds timeout = 10s) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (p())
      return true;
    std::this_thread::sleep_for(10ms);
  }
  return p();
}

inline caf::actor_system_config& registered(caf::actor_system_config& cfg) {
  register_types(cfg);
  return cfg;
}

// The gateway's observer seam, counting connections as the node's metrics do.
struct counting_observer final : observer {
  std::atomic<int64_t> connections{0};
  bool logs(log_level) const override { return false; }
  void log(log_level, std::string_view, std::string_view) override {}
  void connection_opened() override { ++connections; }
  void connection_closed() override { --connections; }
  void refused(std::string_view reason) override {
    std::lock_guard guard{refusals_mtx};
    refusals.emplace_back(reason);
  }
  std::mutex refusals_mtx;
  std::vector<std::string> refusals;  // every refusal label, in order
  std::string metrics_text() const override {
    return "waggle_connections " + std::to_string(connections.load()) + "\n";
  }
};

// The node side: echo connection actors and a scripted submit_event that
// verifies NIP-98 with the function the real node uses.
struct fake_node {
  caf::actor_system_config cfg;
  caf::actor_system sys{registered(cfg)};
  std::shared_ptr<counting_observer> watch = std::make_shared<counting_observer>();
  counting_observer& stats = *watch;
  waggle::community community{1, relay_host, "Test Relay", false, community_policy::open, "", "", {}};

  std::mutex mtx;
  std::vector<std::string> frames;                           // forwarded to actors
  std::vector<std::pair<std::string, std::string>> submits;  // (body, auth pubkey)
  std::atomic<int> opened{0};
  std::atomic<int> closed{0};
  std::atomic<bool> ready{true};
  std::atomic<bool> draining{false};
  // The real connection actor tells its sink when it has handled a frame
  // (the session's frame credit); with this false the actors never do, and
  // a test hands the credit back itself through last_sink.
  std::atomic<bool> ack_frames{true};
  socket_sink_ptr last_sink;  // under mtx
  // The threads that answer POST /events, joined here rather than detached:
  // a detached one could still be ending while the process exits.
  std::vector<std::thread> answerers;  // under mtx

  ~fake_node() {
    for (auto& t : answerers)
      t.join();
  }

  std::vector<std::string> frames_copy() {
    std::lock_guard lock{mtx};
    return frames;
  }
  std::size_t frames_seen() {
    std::lock_guard lock{mtx};
    return frames.size();
  }
  socket_sink_ptr sink_copy() {
    std::lock_guard lock{mtx};
    return last_sink;
  }

  node_api api() {
    node_api a;
    a.find_community = [this](std::string_view host) -> std::optional<waggle::community> {
      if (normalize_host(host) == relay_host)
        return community;
      return std::nullopt;
    };
    a.open_connection = [this](const waggle::community&, const std::string& host,
                               const std::string& remote_ip,
                               socket_sink_ptr sink) -> connection_actor {
      EXPECT_EQ(normalize_host(host), relay_host);  // the Host as sent; the node normalizes it
      EXPECT_EQ(remote_ip, "127.0.0.1");  // the write policy's sourceInfo
      ++opened;
      {
        std::lock_guard lock{mtx};
        last_sink = sink;
      }
      return sys.spawn([this, sink](connection_actor::pointer self) -> connection_actor::behavior_type {
        return {
          [this, sink](const socket_frame& f) {
            {
              std::lock_guard lock{mtx};
              frames.push_back(f.text);
            }
            if (f.text == "burst") {
              // Four threads at once, each its own numbered frames (shared
              // and plain alternating); the first closes after its last one.
              std::vector<std::thread> senders;
              for (int t = 0; t < burst_senders; ++t)
                senders.emplace_back([sink, t] {
                  auto body = std::make_shared<const std::string>("{\"t\":" + std::to_string(t) + "}");
                  for (int i = 0; i < burst_frames; ++i) {
                    auto head = "s" + std::to_string(t) + ":" + std::to_string(i) + ":";
                    if (i % 2)
                      sink->send_frame(out_frame{std::move(head), body, "!"});
                    else
                      sink->send_text(head + *body + "!");
                  }
                  if (t == 0)
                    sink->close(4001, "burst done");
                });
              for (auto& s : senders)
                s.join();
            } else if (f.text == "flood_shared") {
              // Few frames, many bytes: only the byte cap can see them.
              auto body = std::make_shared<const std::string>(std::string(4000, 'x'));
              for (int i = 0; i < 20000; ++i)
                sink->send_frame(out_frame{std::string{"h"}, body, "]"});
            } else if (f.text == "backlog") {
              // Frames larger than a socket's free space, under both caps:
              // the kernel takes each write in parts.
              auto body = std::make_shared<const std::string>(std::string(backlog_bytes, 'y'));
              for (int i = 0; i < backlog_frames; ++i)
                sink->send_frame(out_frame{"b" + std::to_string(i) + ":", body, "!"});
            } else if (f.text == "flood") {
              for (int i = 0; i < 100000; ++i)
                sink->send_text(R"(["EVENT","s",")" + std::string(200, 'x') + R"("])");
            } else if (f.text == "close") {
              sink->close(4000, "bye");
            } else {
              sink->send_text("echo:" + f.text);
            }
            if (ack_frames.load())
              sink->frame_handled();
          },
          [this, self](const socket_closed&) {
            ++closed;
            self->quit();
          },
          [](const socket_drained&) {},
          [](history_stall_check) {},
          [](const live_event&) {},
          [](drain_request) {},
          [](const channel_revoked&) {},
          [](const access_revoked&) {},
          [](const address_blocked&) {},
        };
      });
    };
    a.submit_event = [this](const waggle::community&, http_event_request req,
                            std::function<void(http_event_reply)> done) {
      auto reply = [&done](std::string id, const waggle::answer& x) {
        done({std::move(id), x.accepted, x.message, x.http_status});
      };
      auto auth = proto::verify_nip98(req.authorization, "POST", req.host, req.target, req.body,
                                      static_cast<int64_t>(std::time(nullptr)));
      if (!auth.ok)
        return reply({}, answer_for(auth.err));
      EXPECT_EQ(req.remote_ip, "127.0.0.1");
      {
        std::lock_guard lock{mtx};
        submits.emplace_back(req.body, auth.pubkey);
      }
      // Answer from another thread, like the real node does.
      std::thread answerer([body = std::move(req.body), done = std::move(done)] {
        auto ev = proto::parse_event(body);
        if (!ev)
          return done({"", false, answer_for(ev.error()).message, 400});
        if (ev->content == "please-restrict") {
          auto x = answer_for(status{ec::restricted, "not a member"});
          return done({ev->id, x.accepted, x.message, x.http_status});
        }
        done({ev->id, true, "", 200});
      });
      std::lock_guard lock{mtx};
      answerers.push_back(std::move(answerer));
    };
    a.relay_info = [](const waggle::community&) { return nip11_doc; };
    a.ready = [this] { return ready.load(); };
    a.draining = [this] { return draining.load(); };
    a.watch = watch;
    return a;
  }
};

class GatewayTest : public ::testing::Test {
 protected:
  void start(server_limits limits = {}) {
    srv = std::make_unique<server>(node.api(), limits, "127.0.0.1", 0, 2);
    port = srv->start();
    ASSERT_NE(port, 0);
  }
  void TearDown() override { srv.reset(); }

  std::string host_header() const { return std::string(relay_host) + ":" + std::to_string(port); }

  http_response get(const std::string& target, header_list headers = {}) {
    if (headers.empty() || headers.front().first != "Host")
      headers.insert(headers.begin(), {"Host", host_header()});
    return http_request("127.0.0.1", port, "GET", target, headers);
  }

  bool connect(ws_client& c) { return c.connect("127.0.0.1", port, host_header()); }

  fake_node node;
  std::unique_ptr<server> srv;
  uint16_t port = 0;
};

// Raw bytes in, whatever comes back until the server closes (or timeout).
// With `until`, stops reading once that text arrived.
inline std::string raw_exchange(uint16_t port, const std::string& bytes, const std::string& until = {}) {
  namespace net = boost::asio;
  net::io_context ioc;
  net::ip::tcp::socket s{ioc};
  s.connect({net::ip::make_address("127.0.0.1"), port});
  boost::system::error_code ec;
  net::write(s, net::buffer(bytes), ec);
  std::string out;
  char buf[4096];
  // The server answers errors with Connection: close, so read to EOF.
  struct timeval tv{5, 0};
  setsockopt(s.native_handle(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  for (;;) {
    auto n = s.read_some(net::buffer(buf), ec);
    if (ec)
      break;
    out.append(buf, n);
    if (!until.empty() && out.find(until) != std::string::npos)
      break;
  }
  return out;
}

}  // namespace waggle::gateway::test_support
