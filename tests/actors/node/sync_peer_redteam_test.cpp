// Red team (`waggle sync` against a hostile relay, actors/node/sync_peer.cpp):
// the relay is a few lines of raw WebSocket here, sending what it likes.
// Claim: a hostile relay cannot crash `waggle sync`.

#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <openssl/evp.h>
#include <openssl/sha.h>

#include <atomic>
#include <functional>
#include <thread>

#include "actors/node/sync_peer.hpp"
#include "messages/proto/negentropy.hpp"

namespace neg = waggle::proto::negentropy;

namespace {

// One connection: the upgrade, then `script(conn)`.
class fake_relay {
 public:
  explicit fake_relay(std::function<void(fake_relay&)> script) : script_(std::move(script)) {
    listener_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ::bind(listener_, reinterpret_cast<sockaddr*>(&a), sizeof a);
    ::listen(listener_, 1);
    socklen_t len = sizeof a;
    ::getsockname(listener_, reinterpret_cast<sockaddr*>(&a), &len);
    port_ = ntohs(a.sin_port);
    thread_ = std::thread([this] { serve(); });
  }
  ~fake_relay() {
    ::shutdown(listener_, SHUT_RDWR);
    ::close(listener_);
    if (conn_ >= 0)
      ::shutdown(conn_, SHUT_RDWR);
    thread_.join();
    if (conn_ >= 0)
      ::close(conn_);
  }
  uint16_t port() const { return port_; }

  void send_text(const std::string& payload) {
    std::string f(1, char(0x81));
    size_t n = payload.size();
    if (n < 126) {
      f.push_back(char(n));
    } else if (n < 65536) {
      f.push_back(char(126));
      f.push_back(char(n >> 8));
      f.push_back(char(n & 0xff));
    } else {
      f.push_back(char(127));
      for (int s = 56; s >= 0; s -= 8)
        f.push_back(char((uint64_t(n) >> s) & 0xff));
    }
    f += payload;
    write_all(f);
  }
  // The next text frame of the client (masked), or nullopt when it is gone.
  std::optional<std::string> read_text() {
    unsigned char h[2];
    if (!read_all(h, 2))
      return std::nullopt;
    uint64_t n = h[1] & 0x7f;
    if (n == 126) {
      unsigned char e[2];
      if (!read_all(e, 2))
        return std::nullopt;
      n = (uint64_t(e[0]) << 8) | e[1];
    } else if (n == 127) {
      unsigned char e[8];
      if (!read_all(e, 8))
        return std::nullopt;
      n = 0;
      for (auto c : e)
        n = (n << 8) | c;
    }
    unsigned char mask[4];
    if (!read_all(mask, 4))
      return std::nullopt;
    std::string data(n, '\0');
    if (!read_all(data.data(), n))
      return std::nullopt;
    for (size_t i = 0; i < n; ++i)
      data[i] = char(data[i] ^ mask[i % 4]);
    if ((h[0] & 0x0f) == 8)
      return std::nullopt;  // close
    return data;
  }

 private:
  void serve() {
    conn_ = ::accept(listener_, nullptr, nullptr);
    if (conn_ < 0)
      return;
    std::string req;
    char buf[4096];
    while (req.find("\r\n\r\n") == std::string::npos) {
      auto n = ::recv(conn_, buf, sizeof buf, 0);
      if (n <= 0)
        return;
      req.append(buf, size_t(n));
    }
    auto at = req.find("Sec-WebSocket-Key:");
    if (at == std::string::npos)
      at = req.find("sec-websocket-key:");
    auto start = req.find_first_not_of(' ', at + 18);
    auto key = req.substr(start, req.find("\r\n", start) - start);
    key += "258EAFA5-E914-47DA-95CA-C5AB0DC85B11";
    unsigned char sha[20];
    SHA1(reinterpret_cast<const unsigned char*>(key.data()), key.size(), sha);
    unsigned char b64[64];
    int len = EVP_EncodeBlock(b64, sha, 20);
    write_all("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
              "Sec-WebSocket-Accept: " + std::string(reinterpret_cast<char*>(b64), size_t(len)) +
              "\r\n\r\n");
    script_(*this);
  }
  bool read_all(void* p, size_t n) {
    auto* c = static_cast<char*>(p);
    while (n > 0) {
      auto r = ::recv(conn_, c, n, 0);
      if (r <= 0)
        return false;
      c += r;
      n -= size_t(r);
    }
    return true;
  }
  void write_all(const std::string& s) {
    size_t off = 0;
    while (off < s.size()) {
      auto r = ::send(conn_, s.data() + off, s.size() - off, MSG_NOSIGNAL);
      if (r <= 0)
        return;
      off += size_t(r);
    }
  }

  std::function<void(fake_relay&)> script_;
  int listener_ = -1, conn_ = -1;
  uint16_t port_ = 0;
  std::thread thread_;
};

std::string varint(uint64_t n) {
  std::string out;
  char buf[10];
  size_t len = 0;
  do {
    buf[len++] = char(n & 0x7f);
    n >>= 7;
  } while (n);
  for (size_t i = len; i-- > 0;)
    out.push_back(char(buf[i] | (i > 0 ? 0x80 : 0)));
  return out;
}

// The value after `"key":"` in a JSON text (good enough for the frames here).
std::string field(const std::string& json, const std::string& key) {
  auto at = json.find("\"" + key + "\":\"");
  if (at == std::string::npos)
    return {};
  at += key.size() + 4;
  return json.substr(at, json.find('"', at) - at);
}

const std::string secret(64, '1');

}  // namespace

// The relay's first frame (where the AUTH challenge should be) is 4 MiB of
// '[': rapidjson's default (recursive) parser, used on every frame of the
// relay in sync_peer.cpp (connect, reconcile, fetch, publish), overflows the
// stack. `waggle sync ws://hostile/` dies of SIGSEGV (seen: exit 139). The
// relay's own parser uses kParseIterativeFlag for this reason.
TEST(SyncPeerRedTeam, ADeeplyNestedFrameFromTheRelayIsNotACrash) {
  EXPECT_EXIT(
    {
      fake_relay relay([](fake_relay& r) {
        r.send_text(std::string(4u << 20, '['));
        r.read_text();
      });
      waggle::sync_peer peer{std::chrono::seconds(5)};
      auto err = peer.connect("ws://127.0.0.1:" + std::to_string(relay.port()) + "/", secret);
      std::fprintf(stderr, "connect: %s\n", err.c_str());
      std::_Exit(0);
    },
    ::testing::ExitedWithCode(0), "");
}

// Every answer of the relay is 29 bytes: "none of your items up to 2^40" (an
// empty id list) and "the rest differs" (a wrong fingerprint of the empty
// rest). The initiator lists its whole set as `have` again and answers, every
// round, for as long as the relay likes: `waggle sync` never ends and its
// memory grows by the set per round (seen: 44,614 local events, RSS 5.5 GB
// after 18 s, ~1,100 rounds). Here the relay stops after 300 rounds.
TEST(SyncPeerRedTeam, AHostileRelayCannotKeepTheReconciliationGoingForever) {
  const std::string body = std::string(1, char(0x61)) + varint(uint64_t{1} << 40) + varint(0) +
                           varint(2) + varint(0) + varint(0) + varint(0) + varint(1) +
                           std::string(16, '\x42');
  std::atomic<int> rounds{0};
  fake_relay relay([&](fake_relay& r) {
    r.send_text(R"(["AUTH","challenge"])");
    while (auto f = r.read_text()) {
      if (f->rfind("[\"AUTH\"", 0) == 0) {
        r.send_text("[\"OK\",\"" + field(*f, "id") + "\",true,\"\"]");
      } else if (f->rfind("[\"NEG-OPEN\"", 0) == 0 || f->rfind("[\"NEG-MSG\"", 0) == 0) {
        if (++rounds > 300)
          return;
        auto sub_start = f->find(",\"") + 2;
        auto sub = f->substr(sub_start, f->find('"', sub_start) - sub_start);
        r.send_text("[\"NEG-MSG\",\"" + sub + "\",\"" + neg::to_hex(body) + "\"]");
      }
    }
  });
  neg::storage ours;
  for (uint64_t i = 0; i < 1000; ++i) {
    std::string id(32, '\0');
    for (int b = 0; b < 8; ++b)
      id[b] = char((i * 0x9e3779b97f4a7c15ull) >> (56 - 8 * b));
    ours.insert(1700000000 + i, id);
  }
  ours.seal();
  waggle::sync_peer peer{std::chrono::seconds(5)};
  ASSERT_EQ(peer.connect("ws://127.0.0.1:" + std::to_string(relay.port()) + "/", secret), "");
  waggle::proto::filter f;
  auto r = peer.reconcile(f, ours, 30000);
  std::printf("round trips %zu, have %zu (of %zu ours), error: %s\n", r.round_trips,
              r.have.size(), ours.size(), r.error.c_str());
  EXPECT_LE(r.have.size(), ours.size()) << "each of our ids reported once at most";
  EXPECT_LT(r.round_trips, 300u) << "the reconciliation should give up on a relay that never ends it";
}
