// The gateway's WebSocket sessions against a fake node (gateway_fixture.hpp):
// frames both ways, closes, slow consumers, keep-alive, connection caps,
// draining and shutdown, and the frame credit.

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "tests/gateway/gateway_fixture.hpp"

using namespace std::chrono_literals;
using namespace waggle;
using namespace waggle::gateway;
using namespace waggle::gateway::test_support;

namespace {

TEST_F(GatewayTest, WebSocketRoundTrip) {
  start();
  ws_client c;
  ASSERT_TRUE(connect(c)) << c.error();
  EXPECT_TRUE(eventually([&] { return node.stats.connections.load() == 1; }));
  ASSERT_TRUE(c.send_text(R"(["REQ","a",{}])"));
  auto reply = c.read_text(5s);
  ASSERT_TRUE(reply);
  EXPECT_EQ(*reply, R"(echo:["REQ","a",{}])");
  // Several frames in order.
  for (int i = 0; i < 50; ++i)
    ASSERT_TRUE(c.send_text(std::string("m").append(std::to_string(i))));
  for (int i = 0; i < 50; ++i) {
    auto r = c.read_text(5s);
    ASSERT_TRUE(r);
    EXPECT_EQ(*r, "echo:m" + std::to_string(i));
  }
  c.close();
  EXPECT_TRUE(eventually([&] { return node.closed.load() == 1; }));
  EXPECT_TRUE(eventually([&] { return node.stats.connections.load() == 0; }));
  EXPECT_TRUE(eventually([&] { return srv->websocket_count() == 0; }));
}

TEST_F(GatewayTest, ActorClosesWithItsCode) {
  start();
  ws_client c;
  ASSERT_TRUE(connect(c));
  ASSERT_TRUE(c.send_text("close"));
  EXPECT_FALSE(c.read_text(5s));
  EXPECT_FALSE(c.is_open());
  EXPECT_EQ(c.close_code(), 4000);
  EXPECT_TRUE(eventually([&] { return node.closed.load() == 1; }));
}

TEST_F(GatewayTest, OversizedFrameClosesWith1009AndIsNotForwarded) {
  start();
  ws_client c;
  ASSERT_TRUE(connect(c));
  c.send_text(std::string(70 * 1024, 'a'));  // may fail half-way: the server tears down
  EXPECT_FALSE(c.read_text(5s));
  EXPECT_EQ(c.close_code(), 1009);
  EXPECT_TRUE(eventually([&] { return node.closed.load() == 1; }));
  EXPECT_TRUE(node.frames_copy().empty());
}

TEST_F(GatewayTest, SlowConsumerIsDroppedAndOthersAreServed) {
  start();
  ws_client slow;
  ASSERT_TRUE(connect(slow));
  ASSERT_TRUE(slow.send_text("flood"));
  // The slow client never reads; the server gives up on it.
  ASSERT_TRUE(eventually([&] { return node.closed.load() == 1; }, 20s));
  EXPECT_TRUE(eventually([&] { return node.stats.connections.load() == 0; }));

  ws_client other;
  ASSERT_TRUE(connect(other));
  ASSERT_TRUE(other.send_text("still there?"));
  auto r = other.read_text(5s);
  ASSERT_TRUE(r);
  EXPECT_EQ(*r, "echo:still there?");

  // What the slow client gets: some frames, never all of them.
  size_t received = 0;
  bool saw_notice = false;
  while (auto m = slow.read_text(5s)) {
    if (m->find("NOTICE") != std::string::npos)
      saw_notice = true;
    else
      ++received;
  }
  EXPECT_LT(received, 100000u);
  std::printf("slow client: %zu frames, notice=%d, close code %u\n", received, int(saw_notice),
              unsigned(slow.close_code()));
  EXPECT_FALSE(slow.is_open());
  if (saw_notice) {  // the NOTICE and a 1008 close make it if the buffers had room
    EXPECT_EQ(slow.close_code(), 1008);
  }
}

// The sink's inbox (ws_session.hpp, session_inbox): frames from several
// threads at once keep each thread's order, and a close is queued behind the
// frames its thread sent first (which all arrive), never ahead of them.
TEST_F(GatewayTest, InboxKeepsEachSendersOrderAndClosesAfterItsFrames) {
  server_limits limits;
  limits.max_outbound_frames = 100000;  // the burst outruns any reader
  start(limits);
  ws_client c;
  ASSERT_TRUE(connect(c));
  ASSERT_TRUE(c.send_text("burst"));
  std::vector<int> next(burst_senders, 0);
  while (auto m = c.read_text(10s)) {
    int t = -1, i = -1, used = 0;
    ASSERT_EQ(std::sscanf(m->c_str(), "s%d:%d:%n", &t, &i, &used), 2) << *m;
    ASSERT_TRUE(t >= 0 && t < burst_senders) << *m;
    ASSERT_EQ(i, next[t]) << "sender " << t << " out of order";
    EXPECT_EQ(m->substr(used), "{\"t\":" + std::to_string(t) + "}!");
    ++next[t];
  }
  EXPECT_EQ(next[0], burst_frames) << "a frame sent before the close was lost";
  EXPECT_EQ(c.close_code(), 4001);
  EXPECT_TRUE(eventually([&] { return node.closed.load() == 1; }));
}

// A slow consumer's queue is counted in bytes of whole frames, shared parts
// included, and every byte is given back when it is dropped.
TEST_F(GatewayTest, SlowConsumerByteCapCountsSharedFrames) {
  server_limits limits;
  limits.max_outbound_frames = 1000000;  // only the byte cap can trip
  limits.max_outbound_bytes = 1u << 20;
  limits.socket_send_buffer = 16u << 10;
  start(limits);
  ws_client slow;
  ASSERT_TRUE(connect(slow));
  ASSERT_TRUE(slow.send_text("flood_shared"));
  ASSERT_TRUE(eventually([&] { return node.closed.load() == 1; }, 20s));
  {
    std::lock_guard guard{node.stats.refusals_mtx};
    EXPECT_NE(std::find(node.stats.refusals.begin(), node.stats.refusals.end(), "slow_consumer"),
              node.stats.refusals.end());
  }
  auto m = get("/metrics");
  EXPECT_TRUE(eventually([&] {
    m = get("/metrics");
    return m.body.find("\nwaggle_outbound_bytes 0\n") != std::string::npos;
  })) << m.body;
}

TEST_F(GatewayTest, KeepAlivePingsDropSilentPeers) {
  server_limits limits;
  limits.ping_interval = 1s;  // ping every 1 s, idle timeout 2 s
  start(limits);
  ws_client silent, live;
  ASSERT_TRUE(connect(silent));
  ASSERT_TRUE(connect(live));
  // `live` keeps a read pending, so its pongs go out; `silent` never reads.
  EXPECT_FALSE(live.read_text(4s));
  EXPECT_TRUE(live.is_open());
  EXPECT_TRUE(eventually([&] { return node.closed.load() == 1; }, 5s));
  ASSERT_TRUE(live.send_text("ping?"));
  auto r = live.read_text(5s);
  ASSERT_TRUE(r);
  EXPECT_EQ(*r, "echo:ping?");
}

TEST_F(GatewayTest, MaxConnectionsEnforced) {
  server_limits limits;
  limits.max_connections = 2;
  limits.max_unauthenticated = 2;  // the echo node never authenticates
  start(limits);
  ws_client a, b, c;
  ASSERT_TRUE(connect(a));
  ASSERT_TRUE(connect(b));
  EXPECT_FALSE(connect(c));
  EXPECT_EQ(c.rejected_status(), 503u);
  a.close();
  ASSERT_TRUE(eventually([&] { return srv->websocket_count() < 2; }));
  EXPECT_TRUE(connect(c)) << c.error();
}

TEST_F(GatewayTest, DrainingAnswers503) {
  start();
  ws_client open;
  ASSERT_TRUE(connect(open));
  node.draining = true;
  ws_client c;
  EXPECT_FALSE(connect(c));
  EXPECT_EQ(c.rejected_status(), 503u);
  EXPECT_EQ(get("/", {{"Accept", "application/nostr+json"}}).status, 503u);
  EXPECT_EQ(get("/readyz").status, 503u);
  EXPECT_EQ(get("/healthz").status, 200u);
  // Existing sockets are the node's to drain.
  ASSERT_TRUE(open.send_text("x"));
  EXPECT_TRUE(open.read_text(5s));
}

TEST_F(GatewayTest, ShutdownClosesSocketsWith1001) {
  start();
  ws_client a, b;
  ASSERT_TRUE(connect(a));
  ASSERT_TRUE(connect(b));
  ASSERT_TRUE(eventually([&] { return node.stats.connections.load() == 2; }));
  std::thread t([&] { srv->shutdown(5s); });
  EXPECT_FALSE(a.read_text(5s));
  EXPECT_EQ(a.close_code(), 1001);
  EXPECT_FALSE(b.read_text(5s));
  EXPECT_EQ(b.close_code(), 1001);
  t.join();
  // The sessions report their close from their own strand, possibly after
  // shutdown() returned.
  EXPECT_TRUE(eventually([&] { return node.closed.load() == 2; }));
  EXPECT_EQ(node.stats.connections.load(), 0);
  ws_client late;
  EXPECT_FALSE(connect(late));
}

// Issue 13, red-team finding 1: however many frames a client sends at once,
// the session forwards at most frame_credit that its actor has not handled,
// and reads on (in order) only as the actor hands credit back.
TEST_F(GatewayTest, FrameCreditBoundsTheFramesAnActorHasNotHandled) {
  constexpr std::size_t credit = ws_session::frame_credit;
  constexpr int total = 1000;
  node.ack_frames = false;
  start();
  ws_client c;
  ASSERT_TRUE(connect(c));
  for (int i = 0; i < total; ++i)
    ASSERT_TRUE(c.send_text("f" + std::to_string(i)));
  ASSERT_TRUE(eventually([&] { return node.frames_seen() >= credit; }));
  // Without the credit the rest would be in the mailbox by now.
  std::this_thread::sleep_for(300ms);
  EXPECT_EQ(node.frames_seen(), credit);

  // Handing credit back as the frames arrive: never more than the credit
  // outstanding, and all of them arrive.
  auto sink = node.sink_copy();
  ASSERT_TRUE(sink);
  std::size_t acked = 0, most_outstanding = 0;
  auto until = std::chrono::steady_clock::now() + 20s;
  while (acked < total && std::chrono::steady_clock::now() < until) {
    auto seen = node.frames_seen();
    most_outstanding = std::max(most_outstanding, seen - acked);
    for (; acked < seen; ++acked)
      sink->frame_handled();
    std::this_thread::sleep_for(1ms);
  }
  EXPECT_EQ(acked, static_cast<std::size_t>(total));
  EXPECT_LE(most_outstanding, credit);
  auto frames = node.frames_copy();
  ASSERT_EQ(frames.size(), static_cast<std::size_t>(total));
  for (int i = 0; i < total; ++i)
    ASSERT_EQ(frames[i], "f" + std::to_string(i)) << "frames reordered at " << i;
  std::lock_guard guard{node.stats.refusals_mtx};
  EXPECT_NE(std::find(node.stats.refusals.begin(), node.stats.refusals.end(), "frame_credit"),
            node.stats.refusals.end());
}

// Red-team finding 6: a session that is not reading (here: out of credit,
// its actor stuck) still notices the client going away, within about
// peer_watch_interval, instead of holding its slot until it reads again.
TEST_F(GatewayTest, AClientGoneWhileOutOfCreditIsClosedAtOnce) {
  node.ack_frames = false;
  start();
  auto c = std::make_unique<ws_client>();
  ASSERT_TRUE(connect(*c));
  for (int i = 0; i < 100; ++i)
    ASSERT_TRUE(c->send_text("f" + std::to_string(i)));
  ASSERT_TRUE(eventually([&] { return node.frames_seen() >= ws_session::frame_credit; }));
  ASSERT_EQ(node.stats.connections.load(), 1);
  auto gone = std::chrono::steady_clock::now();
  c.reset();  // the TCP connection closes, no close handshake
  ASSERT_TRUE(eventually([&] { return node.closed.load() == 1; }, 5s))
    << "the stalled session never noticed its peer had gone";
  auto seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - gone).count();
  std::printf("[ figures  ] a stalled session noticed its peer gone after %.3f s\n", seconds);
  EXPECT_LT(seconds, 2.0);
  EXPECT_TRUE(eventually([&] { return node.stats.connections.load() == 0; }, 2s));
}

TEST_F(GatewayTest, FramesSentRightBehindTheUpgradeAreNotLost) {
  start();
  std::string req =
    "GET / HTTP/1.1\r\nHost: relay.test\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
    "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n";
  // A masked text frame "hi" in the same segment as the request.
  const unsigned char mask[4] = {1, 2, 3, 4};
  std::string frame = "\x81\x82";
  frame.append(reinterpret_cast<const char*>(mask), 4);
  frame += static_cast<char>('h' ^ mask[0]);
  frame += static_cast<char>('i' ^ mask[1]);
  auto out = raw_exchange(port, req + frame, "echo:hi");
  EXPECT_EQ(out.rfind("HTTP/1.1 101", 0), 0u) << out;
  EXPECT_NE(out.find("echo:hi"), std::string::npos);
  EXPECT_TRUE(eventually([&] { return node.closed.load() == 1; }));
  auto frames = node.frames_copy();
  ASSERT_EQ(frames.size(), 1u);
  EXPECT_EQ(frames[0], "hi");
}

// The session writes its frames with its own system calls through a layer
// that also carries Beast's frames (pongs here). When the kernel takes a frame
// in parts, a pong written beside it instead of behind it lands inside the
// frame and corrupts the stream. Frames larger than the socket's free space
// and a client pinging between partial reads make that happen on every run.
TEST_F(GatewayTest, PongsDuringABacklogNeverSplitAFrame) {
  namespace beast = boost::beast;
  namespace websocket = beast::websocket;
  start();
  boost::asio::io_context ioc;
  websocket::stream<boost::asio::ip::tcp::socket> ws{ioc};
  ws.next_layer().connect({boost::asio::ip::make_address("127.0.0.1"), port});
  ws.handshake(host_header(), "/");
  ws.read_message_max(backlog_bytes + 64);
  size_t pongs = 0;
  ws.control_callback([&](websocket::frame_type kind, beast::string_view) {
    if (kind == websocket::frame_type::pong)
      ++pongs;
  });
  ws.write(boost::asio::buffer(std::string("backlog")));
  const std::string body(backlog_bytes, 'y');
  size_t pings = 0;
  beast::error_code ec;
  for (int i = 0; i < backlog_frames; ++i) {
    std::string message;
    size_t chunks = 0;
    do {
      if (chunks++ % 4 == 0) {
        ws.ping({}, ec);
        ASSERT_FALSE(ec) << ec.message();
        ++pings;
        std::this_thread::sleep_for(1ms);
      }
      std::array<char, 64 * 1024> chunk;
      auto n = ws.read_some(boost::asio::buffer(chunk), ec);
      ASSERT_FALSE(ec) << "frame " << i << ": " << ec.message();
      message.append(chunk.data(), n);
    } while (!ws.is_message_done());
    ASSERT_EQ(message.size(), body.size() + 3 + std::to_string(i).size()) << "frame " << i;
    ASSERT_TRUE(message == "b" + std::to_string(i) + ":" + body + "!") << "frame " << i;
  }
  ws.write(boost::asio::buffer(std::string("last")));
  beast::flat_buffer buf;
  ws.read(buf, ec);
  ASSERT_FALSE(ec) << ec.message();
  EXPECT_EQ(beast::buffers_to_string(buf.data()), "echo:last");
  EXPECT_GT(pings, 20u);
  EXPECT_EQ(pongs, pings);  // every pong came back, whole, between frames
  ws.close(websocket::close_code::normal, ec);
}

}  // namespace

// ---------------------------------------------------------------------------
// From the red team of the write-behind layer. Raw clients: a masked frame
// builder and a socket that finished the upgrade and then reads nothing.
namespace redteam {

std::string masked(unsigned opcode, const std::string& payload) {
  const unsigned char mask[4] = {9, 8, 7, 6};
  std::string frame(1, static_cast<char>(0x80 | opcode));
  frame.push_back(static_cast<char>(0x80 | payload.size()));  // < 126 bytes
  frame.append(reinterpret_cast<const char*>(mask), 4);
  for (std::size_t i = 0; i < payload.size(); ++i)
    frame.push_back(static_cast<char>(payload[i] ^ mask[i % 4]));
  return frame;
}

int open_non_reader(uint16_t port, const std::string& host) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  int small = 4096;  // the client's receive window fills at once
  ::setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof small);
  ::setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &small, sizeof small);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    ::close(fd);
    return -1;
  }
  std::string req = "GET / HTTP/1.1\r\nHost: " + host
                    + "\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                      "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n";
  ::send(fd, req.data(), req.size(), MSG_NOSIGNAL);
  std::string head;
  char c;
  while (head.find("\r\n\r\n") == std::string::npos && ::recv(fd, &c, 1, 0) == 1)
    head.push_back(c);
  if (head.rfind("HTTP/1.1 101", 0) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

std::size_t rss_mib() {
  std::FILE* f = std::fopen("/proc/self/status", "r");
  char line[256];
  std::size_t kb = 0;
  while (f && std::fgets(line, sizeof line, f))
    if (std::sscanf(line, "VmRSS: %zu kB", &kb) == 1)
      break;
  if (f)
    std::fclose(f);
  return kb / 1024;
}

}  // namespace redteam

// Claim 2 ("memory held by the layer is bounded"). The layer completes
// Beast's writes at once (write_behind_stream.hpp:62-85), so Beast's read op
// (read.hpp, "Send pong") never waits for a pong to reach the socket: it
// reads the next ping at once. A client that sends pings and reads nothing
// makes the server append a pong per ping to pending_ for ever: not counted
// in max_outbound_bytes or the node-wide budget, and no write-stall watch
// runs (the session itself writes nothing). Before e5b8b65 Beast's pong
// write waited on the socket, so TCP pushed back on the client after a few
// MiB of kernel buffers.
TEST_F(GatewayTest, APingFloodFromANonReaderIsPushedBackNotBuffered) {
  server_limits limits;
  limits.socket_send_buffer = 16u << 10;
  start(limits);
  int fd = redteam::open_non_reader(port, host_header());
  ASSERT_GE(fd, 0);
  std::string block;
  while (block.size() < 64 * 1024)
    block += redteam::masked(9, std::string(125, 'p'));
  const std::size_t rss_before = redteam::rss_mib();
  const std::size_t limit = 256u << 20;  // far over every kernel buffer on the way
  std::size_t sent = 0;
  bool pushed_back = false;
  while (sent < limit) {
    auto n = ::send(fd, block.data(), block.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      sent += static_cast<std::size_t>(n);
      // keep frames whole: finish the block's rest blocking-free or not at all
      std::size_t off = static_cast<std::size_t>(n);
      while (off < block.size()) {
        pollfd p{fd, POLLOUT, 0};
        if (::poll(&p, 1, 2000) <= 0) {
          pushed_back = true;
          break;
        }
        auto m = ::send(fd, block.data() + off, block.size() - off, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (m > 0) {
          off += static_cast<std::size_t>(m);
          sent += static_cast<std::size_t>(m);
        }
      }
      if (pushed_back)
        break;
      continue;
    }
    pollfd p{fd, POLLOUT, 0};
    if (::poll(&p, 1, 2000) <= 0) {
      pushed_back = true;  // the server stopped reading: TCP flow control works
      break;
    }
  }
  std::this_thread::sleep_for(500ms);
  const std::size_t rss_after = redteam::rss_mib();
  std::printf("[ figures  ] a client that never reads pushed %zu MiB of pings; RSS %zu -> %zu MiB\n",
              sent >> 20, rss_before, rss_after);
  EXPECT_TRUE(pushed_back) << "the server took " << (sent >> 20)
                           << " MiB of pings from a client that reads nothing and held a pong "
                              "for each (RSS +"
                           << (rss_after - rss_before) << " MiB)";
  ::close(fd);
}

// Claim 3 ("no leaked session or outbound_bytes count"). When the server
// stops with a session's write in flight (a client that does not read, a
// shutdown bound shorter than the close grace), server::stop() destroys the
// io_context and with it the pending operations; before e5b8b65 that freed
// the session (Beast's write op held it), and ~ws_session sent socket_closed
// and gave back ws_count and outbound_bytes (ws_session.cpp:104-113). Now
// the layer's waiter_ (when_written, ws_session.cpp:388) holds a
// shared_ptr to the session inside the session itself: a cycle no one
// breaks. The actor never hears socket_closed, ws_count stays up, the fd
// and the queue's bytes leak.
TEST(WriteBehind, AStopWithAWriteInFlightStillEndsTheSession) {
  auto node = std::make_unique<fake_node>();
  server_limits limits;
  limits.socket_send_buffer = 16u << 10;
  auto srv = std::make_unique<server>(node->api(), limits, "127.0.0.1", 0, 2);
  const auto port = srv->start();
  ASSERT_NE(port, 0);
  int fd = redteam::open_non_reader(port, std::string(relay_host) + ":" + std::to_string(port));
  ASSERT_GE(fd, 0);
  auto frame = redteam::masked(1, "backlog");  // 3 x 2.5 MB: the write is stuck at once
  ::send(fd, frame.data(), frame.size(), MSG_NOSIGNAL);
  ASSERT_TRUE(eventually([&] { return node->frames_seen() == 1; }));
  std::this_thread::sleep_for(300ms);
  srv->shutdown(1s);  // the close grace (5 s) has not run out: stop() finds the write in flight
  const bool ended = eventually([&] { return node->closed.load() == 1; }, 3s);
  const auto left = srv->websocket_count();
  EXPECT_TRUE(ended) << "the connection actor never heard socket_closed";
  EXPECT_EQ(left, 0u) << "the session outlived its server (ws_count, fd, queue bytes leaked)";
  ::close(fd);
  srv.reset();
  if (!ended)
    (void)node.release();  // its actor never quits: the actor system would wait for it for ever
}
