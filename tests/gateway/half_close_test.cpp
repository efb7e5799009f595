// Red team of issue 16 (fanout16): a client that stops reading while frames
// are queued and then half-closes its TCP connection (shutdown(SHUT_WR)).
// The session's read sees EOF and finish()es, which cancels the write-stall
// watch and the close grace, while Beast's write of the queued frame stays
// pending in a socket nobody reads: nothing ever ends it. The session, its
// fd, its WebSocket and TCP slots and the in-flight frame's bytes (still in
// waggle_outbound_bytes) are held for as long as the client keeps its end
// open, so the write-stall rule that drops non-reading clients is escaped by
// one shutdown() call.

#include <atomic>
#include <chrono>
#include <cstring>
#include <string>
#include <thread>

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <caf/all.hpp>
#include <gtest/gtest.h>

#include "gateway/server.hpp"
#include "messages/fanout.hpp"
#include "messages/register_types.hpp"

using namespace std::chrono_literals;
using namespace waggle;
using namespace waggle::gateway;

namespace {

constexpr const char* relay_host = "relay.test";

caf::actor_system_config& registered(caf::actor_system_config& cfg) {
  register_types(cfg);
  return cfg;
}

template <class Pred>
bool eventually(Pred p, std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (p())
      return true;
    std::this_thread::sleep_for(20ms);
  }
  return p();
}

// Connection actors that answer "big" with 40 frames of 64 KB (2.5 MB, under
// both outbound caps: only the write-stall rule can end a client that does
// not read them).
struct fake_node {
  caf::actor_system_config cfg;
  caf::actor_system sys{registered(cfg)};
  waggle::community community{1, relay_host, "Test Relay", false, community_policy::open, "", "", {}};
  std::atomic<int> closed{0};

  node_api api() {
    node_api a;
    a.find_community = [this](std::string_view host) -> std::optional<waggle::community> {
      if (normalize_host(host) == relay_host)
        return community;
      return std::nullopt;
    };
    a.open_connection = [this](const waggle::community&, const std::string&, const std::string&,
                               socket_sink_ptr sink) -> connection_actor {
      return sys.spawn([this, sink](connection_actor::pointer self) -> connection_actor::behavior_type {
        return {
          [sink](const socket_frame& f) {
            if (f.text == "seq") {
              // Numbered frames, shared and plain alternating, then a close.
              auto body = std::make_shared<const std::string>(std::string(300, 'y'));
              for (int i = 0; i < 3000; ++i) {
                auto head = std::to_string(i) + ":";
                if (i % 2)
                  sink->send_frame(out_frame{std::move(head), body, "!"});
                else
                  sink->send_text(head + *body + "!");
              }
              sink->close(4002, "seq done");
            }
            if (f.text == "big") {
              auto body = std::make_shared<const std::string>(std::string(64000, 'x'));
              for (int i = 0; i < 40; ++i)
                sink->send_frame(out_frame{"[\"EVENT\",\"s\",\"", body, "\"]"});
            }
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
    a.submit_event = [](const waggle::community&, http_event_request,
                        std::function<void(http_event_reply)> done) { done({}); };
    a.relay_info = [](const waggle::community&) { return std::string{"{}"}; };
    a.ready = [] { return true; };
    a.draining = [] { return false; };
    return a;
  }
};

std::string masked(unsigned opcode, const std::string& payload) {
  const unsigned char mask[4] = {9, 8, 7, 6};
  std::string frame(1, static_cast<char>(0x80 | opcode));
  frame.push_back(static_cast<char>(0x80 | payload.size()));  // < 126 bytes
  frame.append(reinterpret_cast<const char*>(mask), 4);
  for (std::size_t i = 0; i < payload.size(); ++i)
    frame.push_back(static_cast<char>(payload[i] ^ mask[i % 4]));
  return frame;
}

// A raw client: the handshake and one masked text frame, then it never reads.
int open_raw(uint16_t port, const std::string& first = "big") {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  int small = 4096;  // the client's receive window fills at once
  ::setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof small);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    ::close(fd);
    return -1;
  }
  std::string req = "GET / HTTP/1.1\r\nHost: relay.test\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                    "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n";
  ::send(fd, req.data(), req.size(), MSG_NOSIGNAL);
  // Read the 101 response (and nothing after it).
  std::string head;
  char c;
  while (head.find("\r\n\r\n") == std::string::npos && ::recv(fd, &c, 1, 0) == 1)
    head.push_back(c);
  if (head.rfind("HTTP/1.1 101", 0) != 0) {
    ::close(fd);
    return -1;
  }
  auto frame = masked(1, first);
  ::send(fd, frame.data(), frame.size(), MSG_NOSIGNAL);
  return fd;
}

TEST(HalfCloseTest, AHalfClosedNonReaderIsStillDroppedByTheWriteStallRule) {
  fake_node node;
  server_limits limits;
  limits.write_stall = 1s;  // a non-reader goes within 2 s...
  limits.socket_send_buffer = 16u << 10;
  auto srv = std::make_unique<server>(node.api(), limits, "127.0.0.1", 0, 2);
  auto port = srv->start();
  ASSERT_NE(port, 0);

  int fd = open_raw(port);
  ASSERT_GE(fd, 0);
  ASSERT_TRUE(eventually([&] { return srv->websocket_count() == 1; }, 5s));
  std::this_thread::sleep_for(300ms);  // the session's write is now stuck on a full window
  // ...but this one half-closes: its FIN ends the session's read.
  ASSERT_EQ(::shutdown(fd, SHUT_WR), 0);
  ASSERT_TRUE(eventually([&] { return node.closed.load() == 1; }, 5s))
    << "the session never saw the FIN";
  // Two write-stall periods and the close grace (5 s) are long past at 8 s.
  const bool released = eventually([&] { return srv->websocket_count() == 0; }, 8s);
  EXPECT_TRUE(released) << "a half-closed client that never reads holds its WebSocket slot, "
                           "its socket and its in-flight frame for good";
  ::close(fd);
  // Closing the client's end (a RST on unread data) is what frees it today.
  EXPECT_TRUE(eventually([&] { return srv->websocket_count() == 0; }, 5s));
  srv.reset();
}

// Claim 3 of the red team: pings flooding in while a corked backlog is
// written (Beast's pongs need the write side our one write in flight holds)
// never corrupt, reorder or cut the stream, and the close comes after every
// frame queued before it.
TEST(HalfCloseTest, PingFloodDuringACorkedBacklogKeepsTheStreamWhole) {
  fake_node node;
  server_limits limits;
  limits.max_outbound_frames = 100000;
  limits.socket_send_buffer = 16u << 10;
  auto srv = std::make_unique<server>(node.api(), limits, "127.0.0.1", 0, 2);
  auto port = srv->start();
  ASSERT_NE(port, 0);
  int fd = open_raw(port, "seq");
  ASSERT_GE(fd, 0);
  struct timeval tv{10, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  std::string in;
  auto need = [&](std::size_t n) {
    char buf[4096];
    while (in.size() < n) {
      auto got = ::recv(fd, buf, sizeof buf, 0);
      if (got <= 0)
        return false;
      in.append(buf, static_cast<std::size_t>(got));
    }
    return true;
  };
  int next = 0, pongs = 0, pings_sent = 0;
  uint16_t close_code = 0;
  const std::string want_tail = std::string(300, 'y') + "!";
  for (int frames = 0; close_code == 0; ++frames) {
    // Two pings per frame read, for the first 1,500 frames: a flood.
    for (int k = 0; k < 2 && pings_sent < 3000; ++k, ++pings_sent) {
      auto ping = masked(9, "p" + std::to_string(pings_sent));
      ::send(fd, ping.data(), ping.size(), MSG_NOSIGNAL);
    }
    ASSERT_TRUE(need(2)) << "stream ended after " << next << " frames";
    const unsigned op = static_cast<unsigned char>(in[0]) & 0x0f;
    ASSERT_TRUE(static_cast<unsigned char>(in[0]) & 0x80) << "fragmented frame";
    std::size_t len = static_cast<unsigned char>(in[1]) & 0x7f, at = 2;
    ASSERT_FALSE(static_cast<unsigned char>(in[1]) & 0x80) << "a masked server frame";
    if (len == 126) {
      ASSERT_TRUE(need(4));
      len = (std::size_t(static_cast<unsigned char>(in[2])) << 8) | static_cast<unsigned char>(in[3]);
      at = 4;
    }
    ASSERT_NE(len, 127u);
    ASSERT_TRUE(need(at + len));
    std::string payload = in.substr(at, len);
    in.erase(0, at + len);
    if (op == 0xA) {
      ++pongs;
    } else if (op == 0x1) {
      ASSERT_EQ(payload, std::to_string(next) + ":" + want_tail) << "frame " << next;
      ++next;
    } else if (op == 0x8) {
      ASSERT_GE(payload.size(), 2u);
      close_code = static_cast<uint16_t>((static_cast<unsigned char>(payload[0]) << 8)
                                         | static_cast<unsigned char>(payload[1]));
    } else {
      FAIL() << "unexpected opcode " << op;
    }
  }
  std::printf("[ figures  ] %d frames, %d pings sent, %d pongs, close %u\n", next, pings_sent,
              pongs, unsigned(close_code));
  EXPECT_EQ(next, 3000) << "frames queued before the close were lost";
  EXPECT_EQ(close_code, 4002);
  EXPECT_GT(pongs, 0);
  ::close(fd);
  srv.reset();
}

}  // namespace
