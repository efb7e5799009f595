// NIP-77's reconciliation (messages/proto/negentropy.hpp): both roles against
// each other, the frame cap, and malformed messages. Interoperation with an
// independent implementation is tests/client/negentropy_interop.mjs.

#include <gtest/gtest.h>

#include <openssl/evp.h>

#include <algorithm>
#include <random>
#include <set>

#include "messages/proto/negentropy.hpp"

namespace neg = waggle::proto::negentropy;

namespace {

std::string id_of(uint64_t n) {
  // Distinct, spread ids: the SHA-256 of the number.
  std::string in = std::to_string(n);
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_Digest(in.data(), in.size(), md, &len, EVP_sha256(), nullptr);
  return std::string(reinterpret_cast<char*>(md), 32);
}

struct outcome {
  std::set<std::string> have, need;
  size_t rounds = 0;
  size_t max_message = 0;
  std::string error;
};

// Runs a whole reconciliation: `client` initiates against `server`.
outcome reconcile(const neg::storage& client, const neg::storage& server, size_t client_limit,
                  size_t server_limit) {
  outcome out;
  neg::reconciler c(client, client_limit), s(server, server_limit);
  std::string msg = c.initiate();
  while (!msg.empty()) {
    out.max_message = std::max(out.max_message, msg.size());
    auto answer = s.respond(msg);
    if (!answer.error.empty()) {
      out.error = "server: " + answer.error;
      return out;
    }
    out.max_message = std::max(out.max_message, answer.message.size());
    ++out.rounds;
    auto next = c.reconcile(answer.message);
    if (!next.error.empty()) {
      out.error = "client: " + next.error;
      return out;
    }
    out.have.insert(next.have.begin(), next.have.end());
    out.need.insert(next.need.begin(), next.need.end());
    msg = next.message;
    if (out.rounds > 1000) {
      out.error = "no end";
      return out;
    }
  }
  return out;
}

struct sets {
  neg::storage client, server;
  std::set<std::string> only_client, only_server;
};

// `n` shared items plus `extra` on each side only; `same_second` puts every
// item in one second, so bounds need id prefixes.
void fill(sets& s, size_t n, size_t extra, bool same_second, uint64_t seed = 1) {
  std::mt19937_64 rng(seed);
  auto ts = [&](size_t i) { return same_second ? 1700000000 : 1700000000 + (rng() % 100000) + i % 7; };
  for (size_t i = 0; i < n; ++i) {
    auto t = ts(i);
    s.client.insert(t, id_of(i));
    s.server.insert(t, id_of(i));
  }
  for (size_t i = 0; i < extra; ++i) {
    s.client.insert(ts(i), id_of(10'000'000 + i));
    s.only_client.insert(id_of(10'000'000 + i));
    s.server.insert(ts(i), id_of(20'000'000 + i));
    s.only_server.insert(id_of(20'000'000 + i));
  }
  s.client.seal();
  s.server.seal();
}

}  // namespace

TEST(Negentropy, IdenticalSetsAgreeInOneRound) {
  sets s;
  fill(s, 5000, 0, false);
  auto r = reconcile(s.client, s.server, 0, 0);
  EXPECT_EQ(r.error, "");
  EXPECT_EQ(r.rounds, 1u);
  EXPECT_TRUE(r.have.empty());
  EXPECT_TRUE(r.need.empty());
}

TEST(Negentropy, FindsExactlyTheDifferenceBothWays) {
  sets s;
  fill(s, 20000, 200, false);
  auto r = reconcile(s.client, s.server, 0, 0);
  ASSERT_EQ(r.error, "");
  EXPECT_EQ(r.have, s.only_client);
  EXPECT_EQ(r.need, s.only_server);
}

TEST(Negentropy, ItemsOfOneSecondSplitByIdPrefix) {
  sets s;
  fill(s, 3000, 40, true);
  auto r = reconcile(s.client, s.server, 0, 0);
  ASSERT_EQ(r.error, "");
  EXPECT_EQ(r.have, s.only_client);
  EXPECT_EQ(r.need, s.only_server);
}

TEST(Negentropy, EmptySidesListEverything) {
  sets s;
  fill(s, 0, 700, false);
  neg::storage empty;
  empty.seal();
  auto r = reconcile(empty, s.server, 0, 0);
  ASSERT_EQ(r.error, "");
  EXPECT_TRUE(r.have.empty());
  EXPECT_EQ(r.need, s.only_server);
  auto back = reconcile(s.client, empty, 0, 0);
  ASSERT_EQ(back.error, "");
  EXPECT_EQ(back.have, s.only_client);
  EXPECT_TRUE(back.need.empty());
}

// The frame cap is honoured by both sides, and what does not fit is carried
// to the next round, never dropped: the difference still comes out whole.
TEST(Negentropy, EveryMessageFitsTheFrameLimitAndNothingIsLost) {
  sets s;
  fill(s, 30000, 3000, false, 7);
  auto r = reconcile(s.client, s.server, neg::min_frame_size_limit, neg::min_frame_size_limit);
  ASSERT_EQ(r.error, "");
  EXPECT_LE(r.max_message, neg::min_frame_size_limit);
  EXPECT_GT(r.rounds, 3u);  // the cap made it take more rounds
  EXPECT_EQ(r.have, s.only_client);
  EXPECT_EQ(r.need, s.only_server);
}

// The server cut its id list for the frame: the rest of the range goes out
// as one fingerprint from the cut, so an item only the server holds right
// after the cut is still found.
TEST(Negentropy, AServerCutForTheFrameStillReportsItsLaterItems) {
  neg::storage client, server;
  for (uint64_t i = 0; i < 4000; ++i)
    server.insert(1000 + i, id_of(i));
  client.seal();
  server.seal();
  auto r = reconcile(client, server, 0, neg::min_frame_size_limit);
  ASSERT_EQ(r.error, "");
  EXPECT_EQ(r.need.size(), 4000u);
}

TEST(Negentropy, AnotherVersionIsAnsweredWithOurs) {
  neg::storage s;
  s.seal();
  neg::reconciler server(s, 0);
  auto r = server.respond(std::string(1, char(0x62)));
  EXPECT_EQ(r.error, "");
  EXPECT_EQ(r.message, std::string(1, char(0x61)));
  EXPECT_NE(server.respond(std::string(1, char(0x10))).error, "");
  EXPECT_NE(server.respond("").error, "");
}

TEST(Negentropy, MalformedMessagesAreErrorsNeverCrashes) {
  sets s;
  fill(s, 500, 5, false);
  neg::reconciler client(s.client, 0);
  auto good = client.initiate();
  std::mt19937 rng(3);
  size_t errors = 0;
  for (int round = 0; round < 3000; ++round) {
    neg::reconciler server(s.server, 4096);
    std::string m = good;
    switch (round % 4) {
      case 0:  // truncated
        m.resize(1 + rng() % (m.size() - 1));
        break;
      case 1:  // a byte flipped
        m[1 + rng() % (m.size() - 1)] ^= static_cast<char>(1 + rng() % 255);
        break;
      case 2:  // random bytes after the version
        m.resize(1 + rng() % 64);
        for (size_t i = 1; i < m.size(); ++i)
          m[i] = static_cast<char>(rng());
        break;
      case 3:  // an id list claiming more ids than follow
        m = std::string(1, char(0x61)) + std::string("\x00\x00\x02\xff\xff\xff\x0f", 7);
        break;
    }
    auto r = server.respond(m);
    errors += r.error.empty() ? 0 : 1;
    EXPECT_LE(r.message.size(), 4096u);
  }
  EXPECT_GT(errors, 500u);
}

TEST(Negentropy, FingerprintIsTheReferenceHashOfSumAndCount) {
  // The reference: SHA-256(sum of ids mod 2^256, little-endian || varint(count))[0..16).
  neg::storage s;
  std::string a(32, '\0'), b(32, '\0');
  a[0] = char(0xff);
  b[0] = char(0x02);  // sums to 0x0101: the carry crosses a byte
  s.insert(1, a);
  s.insert(2, b);
  s.seal();
  std::string in(32, '\0');
  in[0] = 0x01;
  in[1] = 0x01;
  in.push_back(2);
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_Digest(in.data(), in.size(), md, &len, EVP_sha256(), nullptr);
  auto fp = s.fingerprint(0, 2);
  EXPECT_TRUE(std::equal(fp.begin(), fp.end(), md));
}

TEST(Negentropy, PackedItemsRoundTrip) {
  std::string packed;
  ASSERT_TRUE(neg::append_packed(packed, 1700000000, neg::to_hex(id_of(1))));
  ASSERT_TRUE(neg::append_packed(packed, 5, neg::to_hex(id_of(2))));
  EXPECT_FALSE(neg::append_packed(packed, 5, "zz"));
  neg::storage s;
  ASSERT_TRUE(neg::load_packed(packed, s));
  s.seal();
  ASSERT_EQ(s.size(), 2u);
  EXPECT_EQ(s.at(0).created_at, 5u);
  EXPECT_EQ(s.at(1).created_at, 1700000000u);
  EXPECT_FALSE(neg::load_packed(packed.substr(1), s));
}
