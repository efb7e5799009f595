// The arithmetic of read admission (docs/protocol.md, "Read limits"): token
// buckets with a made-up clock, the cost of a read, the shared per-key
// table, and read_admission's in-flight bound and withdrawal bookkeeping.
// No actor, no clock, no sleep.

#include <gtest/gtest.h>

#include "actors/connection/read_admission.hpp"
#include "actors/support/token_bucket.hpp"

using namespace waggle;
using namespace std::chrono_literals;

namespace {

const bucket_clock::time_point t0{std::chrono::seconds(1000)};

proto::filter with_ids(size_t n) {
  proto::filter f;
  f.ids = std::vector<std::string>(n, std::string(64, 'a'));
  return f;
}

}  // namespace

TEST(token_bucket, a_fresh_bucket_is_full_and_a_take_beyond_it_takes_nothing) {
  token_bucket b;
  bucket_rate r{10, 5};
  EXPECT_DOUBLE_EQ(b.tokens(t0, r), 5);
  EXPECT_TRUE(b.take(3, t0, r));
  EXPECT_DOUBLE_EQ(b.tokens(t0, r), 2);
  EXPECT_FALSE(b.take(3, t0, r));  // refused: nothing taken
  EXPECT_DOUBLE_EQ(b.tokens(t0, r), 2);
  EXPECT_TRUE(b.take(2, t0, r));
  EXPECT_FALSE(b.take(0.5, t0, r));
}

TEST(token_bucket, refills_at_its_rate_up_to_its_burst) {
  token_bucket b;
  bucket_rate r{10, 5};
  ASSERT_TRUE(b.take(5, t0, r));
  EXPECT_DOUBLE_EQ(b.tokens(t0 + 100ms, r), 1);
  EXPECT_FALSE(b.take(2, t0 + 100ms, r));
  EXPECT_TRUE(b.take(2, t0 + 200ms, r));   // 2 tokens by then
  EXPECT_DOUBLE_EQ(b.tokens(t0 + 200ms, r), 0);
  EXPECT_DOUBLE_EQ(b.tokens(t0 + 10s, r), 5);  // capped at the burst
  EXPECT_TRUE(b.full(t0 + 10s, r));
}

TEST(token_bucket, a_cost_above_the_burst_is_never_admitted_and_rate_zero_is_unlimited) {
  token_bucket b;
  EXPECT_FALSE(b.take(6, t0 + 1h, {10, 5}));
  token_bucket free;
  for (int i = 0; i < 1000; ++i)
    EXPECT_TRUE(free.take(1e6, t0, {0, 0}));
}

TEST(token_bucket, a_clock_that_goes_back_refills_nothing) {
  token_bucket b;
  bucket_rate r{10, 5};
  ASSERT_TRUE(b.take(5, t0, r));
  EXPECT_FALSE(b.take(1, t0 - 1s, r));
  EXPECT_DOUBLE_EQ(b.tokens(t0, r), 0);
}

TEST(keyed_buckets, charges_every_key_or_none) {
  keyed_buckets kb{{1, 10}};
  EXPECT_TRUE(kb.take_all({"a"}, 8, t0));
  // b could pay, a cannot: neither is charged.
  EXPECT_FALSE(kb.take_all({"a", "b"}, 4, t0));
  EXPECT_TRUE(kb.take_all({"b"}, 10, t0));  // b still full
  EXPECT_TRUE(kb.take_all({"a"}, 2, t0));
  EXPECT_FALSE(kb.take_all({"a"}, 1, t0));
  EXPECT_TRUE(kb.take_all({"a"}, 1, t0 + 1s));
}

TEST(keyed_buckets, forgets_buckets_that_refilled_when_the_table_grows) {
  keyed_buckets kb{{100, 10}};
  for (int i = 0; i < 1023; ++i)
    ASSERT_TRUE(kb.take_all({"k" + std::to_string(i)}, 1, t0));
  EXPECT_EQ(kb.size(), 1023u);
  // 1 s later every one of them is full again; the 1024th take sweeps.
  ASSERT_TRUE(kb.take_all({"late"}, 1, t0 + 1s));
  EXPECT_EQ(kb.size(), 1u);
}

// Issue 34: a search ranks up to --search-max-ranked rows where another
// filter reads at most its limit: 3-6 ms of the database for the commonest
// word of 200,000 notes against about 0.1 ms for a one-id REQ, so each
// search filter costs 100 more (a one-id REQ costs 2).
TEST(read_cost, a_search_filter_costs_a_hundred_more) {
  proto::filter plain;
  proto::filter searching;
  searching.search = "bees";
  EXPECT_DOUBLE_EQ(read_cost({plain}), 2);
  EXPECT_DOUBLE_EQ(read_cost({searching}), 102);
  EXPECT_DOUBLE_EQ(read_cost({searching, searching}), 203);
}

TEST(read_cost, one_plus_filters_plus_values_over_100) {
  EXPECT_DOUBLE_EQ(read_cost({with_ids(1)}), 2.01);
  EXPECT_DOUBLE_EQ(read_cost({proto::filter{}}), 2);
  std::vector<proto::filter> widest(10, with_ids(500));
  EXPECT_DOUBLE_EQ(read_cost(widest), 1 + 10 + 50);
  proto::filter tags;
  tags.kinds = std::vector<int32_t>{1, 9};
  tags.tags['h'] = {"a", "b", "c"};
  EXPECT_DOUBLE_EQ(read_cost({tags}), 2.05);
}

TEST(read_admission, bounds_reads_in_flight_before_it_charges_tokens) {
  read_admission_settings s;
  s.max_in_flight = 2;
  s.per_connection = {1, 10};
  read_admission ra{s};
  std::set<std::string> keys{"pk"};
  EXPECT_TRUE(ra.admit(1, "a", false, {proto::filter{}}, keys, "", t0).st.ok());
  EXPECT_TRUE(ra.admit(2, "b", true, {proto::filter{}}, keys, "", t0).st.ok());
  auto refused = ra.admit(3, "c", false, {proto::filter{}}, keys, "", t0);
  EXPECT_EQ(refused.st.message(), "rate-limited: too many queries in flight");
  EXPECT_EQ(refused.label, "reads_in_flight");
  ra.done(2);
  // 4 tokens spent of 10: the refused read took none.
  EXPECT_TRUE(ra.admit(4, "d", false, {proto::filter{}}, keys, "", t0).st.ok());
  ra.done(4);
  ra.done(1);
  auto out_of_tokens = ra.admit(5, "e", false, std::vector<proto::filter>(4), keys, "", t0);
  EXPECT_EQ(out_of_tokens.label, "read_rate_connection");
  EXPECT_EQ(out_of_tokens.st.code, ec::rate_limited);
}

TEST(read_admission, shared_buckets_are_charged_per_key_and_per_address) {
  auto shared = std::make_shared<shared_read_buckets>(bucket_rate{1, 4}, bucket_rate{1, 6});
  read_admission_settings s;
  s.shared = shared;
  read_admission one{s}, two{s};
  std::vector<proto::filter> f{proto::filter{}};  // costs 2
  EXPECT_TRUE(one.admit(1, "a", false, f, {"pk"}, "10.0.0.1", t0).st.ok());
  one.done(1);
  EXPECT_TRUE(two.admit(1, "a", false, f, {"pk"}, "10.0.0.1", t0).st.ok());
  two.done(1);
  // The key's 4 tokens are spent across both connections.
  EXPECT_EQ(two.admit(2, "a", false, f, {"pk"}, "10.0.0.1", t0).label, "read_rate_pubkey");
  // Another key from the same address: the address has 2 of its 6 left.
  EXPECT_TRUE(two.admit(3, "a", false, f, {"other"}, "10.0.0.1", t0).st.ok());
  two.done(3);
  EXPECT_EQ(two.admit(4, "a", false, f, {"third"}, "10.0.0.1", t0).label, "read_rate_address");
}

// Issue 13, finding 2: an IPv6 client holds a whole /64, so the address
// bucket is the prefix's, not the full address's.
TEST(read_admission, the_address_bucket_of_an_ipv6_client_is_its_64s) {
  auto shared = std::make_shared<shared_read_buckets>(bucket_rate{0, 0}, bucket_rate{1, 4});
  read_admission_settings s;
  s.shared = shared;
  read_admission one{s}, two{s}, elsewhere{s};
  std::vector<proto::filter> f{proto::filter{}};  // costs 2
  EXPECT_TRUE(one.admit(1, "a", false, f, {}, "2001:db8:1:2::1", t0).st.ok());
  EXPECT_TRUE(two.admit(1, "a", false, f, {}, "2001:db8:1:2:ffff::9", t0).st.ok());
  EXPECT_EQ(two.admit(2, "b", false, f, {}, "2001:db8:1:2:ffff::9", t0).label,
            "read_rate_address");
  EXPECT_TRUE(elsewhere.admit(1, "a", false, f, {}, "2001:db8:1:3::1", t0).st.ok());
  // A /128 setting keys the full address again.
  s.ipv6_prefix = 128;
  read_admission exact{s};
  EXPECT_TRUE(exact.admit(1, "a", false, f, {}, "2001:db8:1:2::7", t0).st.ok());
}

TEST(read_admission, a_closed_subscription_gives_back_its_requests_at_the_pool) {
  read_admission ra;
  std::set<std::string> keys{"pk"};
  ASSERT_TRUE(ra.admit(1, "s", false, {}, keys, "", t0).st.ok());
  ASSERT_TRUE(ra.admit(2, "s", true, {}, keys, "", t0).st.ok());  // a COUNT on the same id
  ASSERT_TRUE(ra.admit(3, "t", false, {}, keys, "", t0).st.ok());
  EXPECT_FALSE(ra.any_at_pool());
  ra.at_pool(1, 41);
  ra.at_pool(2, 42);
  EXPECT_TRUE(ra.any_at_pool());
  EXPECT_EQ(ra.end_sub("s"), std::vector<uint64_t>{41});  // the COUNT is not the REQ's
  EXPECT_EQ(ra.in_flight(), 2u);
  ra.at_pool(3, 0);  // waiting for the hub: nothing to withdraw
  EXPECT_TRUE(ra.end_sub("t").empty());
  EXPECT_EQ(ra.in_flight(), 1u);
}
