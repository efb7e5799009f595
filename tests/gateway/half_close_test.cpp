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
#include "messages/types.hpp"

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

// A raw client: the handshake and one masked text frame, then it never reads.
int open_raw(uint16_t port) {
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
  const unsigned char mask[4] = {9, 8, 7, 6};
  const std::string text = "big";
  std::string frame = "\x81";
  frame.push_back(static_cast<char>(0x80 | text.size()));
  frame.append(reinterpret_cast<const char*>(mask), 4);
  for (std::size_t i = 0; i < text.size(); ++i)
    frame.push_back(static_cast<char>(text[i] ^ mask[i % 4]));
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

}  // namespace
