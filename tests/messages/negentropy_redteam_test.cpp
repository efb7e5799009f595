// Red team (NIP-77 codec): duplicates in the initiator's results under a frame
// limit, a hostile responder that never lets the initiator finish, and the
// responder's cost per message.

#include <gtest/gtest.h>

#include <openssl/evp.h>

#include <chrono>
#include <map>
#include <random>
#include <set>

#include "messages/proto/negentropy.hpp"

namespace neg = waggle::proto::negentropy;

namespace {

std::string id_of(uint64_t n) {
  std::string in = std::to_string(n);
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_Digest(in.data(), in.size(), md, &len, EVP_sha256(), nullptr);
  return std::string(reinterpret_cast<char*>(md), 32);
}

void put_varint(uint64_t n, std::string& out) {
  char buf[10];
  size_t len = 0;
  do {
    buf[len++] = static_cast<char>(n & 0x7f);
    n >>= 7;
  } while (n != 0);
  for (size_t i = len; i-- > 0;)
    out.push_back(static_cast<char>(buf[i] | (i > 0 ? 0x80 : 0)));
}

}  // namespace

// A hostile responder (the remote relay of `waggle sync`): each answer says
// "I have none of your items up to the end of time - 1" (an empty id list),
// then "the rest differs" (a wrong fingerprint of the empty rest). The
// initiator reports all its items as `have` again, and answers with a
// message, every round: it never ends, and what it reports grows by the whole
// set per round of a few bytes.
TEST(NegentropyRedTeam, AHostileResponderCannotKeepTheInitiatorForever) {
  neg::storage ours;
  for (size_t i = 0; i < 10000; ++i)
    ours.insert(1700000000 + i, id_of(i));
  ours.seal();
  std::string answer(1, char(0x61));
  put_varint(uint64_t{1} << 40, answer);  // a finite bound past every item
  put_varint(0, answer);
  put_varint(2, answer);  // id list
  put_varint(0, answer);  // of nothing
  put_varint(0, answer);  // infinity
  put_varint(0, answer);
  put_varint(1, answer);  // fingerprint
  answer += std::string(16, '\x42');
  neg::reconciler c(ours, 30000);
  c.initiate();
  size_t reported = 0, rounds = 0;
  for (; rounds < 200; ++rounds) {
    auto r = c.reconcile(answer);
    if (!r.error.empty() || r.message.empty())
      break;
    reported += r.have.size();
  }
  // An initiator reports each of its items at most once, and ends.
  EXPECT_LE(reported, ours.size()) << answer.size() << "-byte answers made it report "
                                   << reported << " ids in " << rounds << " rounds";
  EXPECT_LT(rounds, 200u);
}

// The responder's worst cost per byte: 500,000 items, messages of the
// frame limit, crafted for work (fingerprints and id lists) - measured.
TEST(NegentropyRedTeam, ResponderCostPerMessage) {
  neg::storage s;
  for (size_t i = 0; i < 500000; ++i)
    s.insert(1700000000 + i / 3, id_of(i));
  s.seal();
  auto time = [&](const std::string& m, const char* what) {
    neg::reconciler r(s, 32 * 1024);
    auto t0 = std::chrono::steady_clock::now();
    size_t out = 0;
    for (int i = 0; i < 20; ++i)
      out = r.respond(m).message.size();
    auto us = std::chrono::duration_cast<std::chrono::microseconds>(
                std::chrono::steady_clock::now() - t0).count() / 20;
    std::printf("%-40s in %6zu B -> out %6zu B: %lld us\n", what, m.size(), out,
                static_cast<long long>(us));
  };
  // 1. Empty id list over everything: 5 bytes in, a full frame of ids out.
  {
    std::string m(1, char(0x61));
    put_varint(0, m);
    put_varint(0, m);
    put_varint(2, m);
    put_varint(0, m);
    time(m, "id list of all");
  }
  // 2. Wrong fingerprints over thousands of one-second ranges.
  {
    std::string m(1, char(0x61));
    for (int i = 0; i < 1600; ++i) {
      put_varint(i == 0 ? 1700000000 + 1 : 2, m);  // step 1 s
      put_varint(0, m);
      put_varint(1, m);
      m += std::string(16, '\x17');
    }
    time(m, "1600 wrong fingerprints");
  }
  // 3. Skips: 3 bytes per binary search.
  {
    std::string m(1, char(0x61));
    for (int i = 0; i < 10000; ++i) {
      put_varint(i == 0 ? 1700000000 + 1 : 2, m);
      put_varint(0, m);
      put_varint(0, m);
    }
    time(m, "10000 skips");
  }
  // 4. Fingerprints of empty ranges that match (no output, one SHA each).
  {
    neg::storage e;
    e.seal();
    auto empty_fp = e.fingerprint(0, 0);
    std::string m(1, char(0x61));
    for (int i = 0; i < 1700; ++i) {
      put_varint(1, m);  // same second, empty range after the first
      put_varint(0, m);
      put_varint(1, m);
      m.append(reinterpret_cast<const char*>(empty_fp.data()), 16);
    }
    time(m, "1700 matching empty fingerprints");
  }
  // 5. Id lists with ids: 16 KiB of ids in, the responder's ids out.
  {
    std::string m(1, char(0x61));
    for (int i = 0; i < 500; ++i) {
      put_varint(i == 0 ? 1700000000 + 1 : 2, m);
      put_varint(0, m);
      put_varint(2, m);
      put_varint(1, m);
      m += id_of(i);
    }
    time(m, "500 id lists of 1");
  }
}

// The initiator's have/need are vectors (sync_peer appends them as they come,
// and prints their sizes): each id should be reported once. Under a frame
// limit, a range the initiator already settled by id list (reported, then
// marked skip, so `emitted_index` stays before it) is covered again by the
// "rest from emitted_index" fingerprint the initiator sends when its own
// message fills up, and settled - reported - a second time. The sets are
// right (the existing tests collect into std::set, which hides this); the
// vectors hold duplicates, e.g. n=10000 extra=500 cl=4096 sl=32768:
// have 507 for 500.
TEST(NegentropyRedTeam, EachDifferenceIsReportedOnceUnderTheFrameLimit) {
  for (size_t n : {2000, 10000, 50000})
    for (size_t extra : {50, 500, 5000})
      for (bool same : {false, true}) {
        neg::storage client, server;
        std::mt19937_64 rng(n + extra);
        auto ts = [&]() -> uint64_t { return same ? 1700000000 : 1700000000 + rng() % 100000; };
        for (size_t i = 0; i < n; ++i) {
          auto t = ts();
          client.insert(t, id_of(i));
          server.insert(t, id_of(i));
        }
        for (size_t i = 0; i < extra; ++i) {
          client.insert(ts(), id_of(10'000'000 + i));
          server.insert(ts(), id_of(20'000'000 + i));
        }
        client.seal();
        server.seal();
        for (size_t cl : {size_t(4096), size_t(30000)})
          for (size_t sl : {size_t(4096), size_t(32768)}) {
            neg::reconciler c(client, cl), s(server, sl);
            std::vector<std::string> have, need;
            std::string msg = c.initiate();
            size_t rounds = 0;
            while (!msg.empty() && rounds++ < 5000) {
              auto a = s.respond(msg);
              ASSERT_EQ(a.error, "");
              auto x = c.reconcile(a.message);
              ASSERT_EQ(x.error, "");
              have.insert(have.end(), x.have.begin(), x.have.end());
              need.insert(need.end(), x.need.begin(), x.need.end());
              msg = x.message;
            }
            std::set<std::string> hs(have.begin(), have.end()), ns(need.begin(), need.end());
            if (have.size() != hs.size() || need.size() != ns.size())
              std::printf("n=%zu extra=%zu same=%d cl=%zu sl=%zu rounds=%zu have=%zu/%zu need=%zu/%zu\n",
                        n, extra, same, cl, sl, rounds, have.size(), hs.size(), need.size(), ns.size());
            EXPECT_EQ(hs.size(), extra);
            EXPECT_EQ(ns.size(), extra);
            EXPECT_EQ(have.size(), hs.size());
            EXPECT_EQ(need.size(), ns.size());
          }
      }
}
