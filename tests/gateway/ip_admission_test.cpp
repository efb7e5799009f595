// The gateway's admission rules without sockets: who X-Forwarded-For makes
// the client, and the per-address table (open connections and new-connection
// bucket) that the per-address cap and the 429s come from.

#include <gtest/gtest.h>

#include "gateway/ip_admission.hpp"
#include "gateway/unauth_queue.hpp"

using namespace std::chrono_literals;
using namespace waggle::gateway;

namespace {

const std::vector<std::string> proxies{"10.0.0.1", "10.0.0.2"};

TEST(forwarded_for, ignored_unless_the_peer_is_a_trusted_proxy) {
  EXPECT_EQ(effective_client_ip("192.0.2.9", "203.0.113.7", proxies), "192.0.2.9");
  EXPECT_EQ(effective_client_ip("192.0.2.9", "203.0.113.7", {}), "192.0.2.9");
}

TEST(forwarded_for, takes_the_right_most_untrusted_entry) {
  EXPECT_EQ(effective_client_ip("10.0.0.1", "203.0.113.7", proxies), "203.0.113.7");
  // The client wrote the left entries itself: they are not believed.
  EXPECT_EQ(effective_client_ip("10.0.0.1", "198.51.100.1, 203.0.113.7", proxies), "203.0.113.7");
  // A chain of our own proxies is walked through.
  EXPECT_EQ(effective_client_ip("10.0.0.1", "198.51.100.1, 203.0.113.7, 10.0.0.2", proxies),
            "203.0.113.7");
  EXPECT_EQ(effective_client_ip("10.0.0.1", " 203.0.113.7 ,10.0.0.2 ", proxies), "203.0.113.7");
}

TEST(forwarded_for, missing_or_garbage_keeps_the_last_trusted_address) {
  EXPECT_EQ(effective_client_ip("10.0.0.1", "", proxies), "10.0.0.1");
  EXPECT_EQ(effective_client_ip("10.0.0.1", "not-an-ip", proxies), "10.0.0.1");
  EXPECT_EQ(effective_client_ip("10.0.0.1", "203.0.113.7, evil, 10.0.0.2", proxies), "10.0.0.2");
  // Only our proxies: the left-most of them is as far as we can see.
  EXPECT_EQ(effective_client_ip("10.0.0.1", "10.0.0.2", proxies), "10.0.0.2");
}

TEST(forwarded_for, addresses_are_canonical) {
  EXPECT_EQ(canonical_ip("::ffff:192.0.2.1"), "192.0.2.1");
  EXPECT_EQ(canonical_ip("[2001:db8::1]"), "2001:db8::1");
  EXPECT_EQ(canonical_ip("2001:DB8:0::1"), "2001:db8::1");
  EXPECT_EQ(canonical_ip("192.0.2.1:443"), "");
  EXPECT_EQ(effective_client_ip("10.0.0.1", "::ffff:203.0.113.7", proxies), "203.0.113.7");
}

// Issue 13, finding 2: IPv6 clients are keyed by their /64 (one subscriber
// holds 2^64 addresses), IPv4 ones by their address.
TEST(address_key, ipv6_by_its_prefix_ipv4_by_its_address) {
  EXPECT_EQ(address_key("2001:db8:1:2::1", 64), "2001:db8:1:2::/64");
  EXPECT_EQ(address_key("2001:db8:1:2:ffff:ffff:ffff:ffff", 64), "2001:db8:1:2::/64");
  EXPECT_NE(address_key("2001:db8:1:3::1", 64), address_key("2001:db8:1:2::1", 64));
  EXPECT_EQ(address_key("2001:db8:1:2ff::1", 56), "2001:db8:1:200::/56");
  EXPECT_EQ(address_key("2001:db8:1:2ff::1", 60), "2001:db8:1:2f0::/60");
  EXPECT_EQ(address_key("2001:db8:1:2ff::1", 63), "2001:db8:1:2fe::/63");
  EXPECT_EQ(address_key("2001:db8:1:2::1", 128), "2001:db8:1:2::1");
  EXPECT_EQ(address_key("192.0.2.1", 64), "192.0.2.1");
  EXPECT_NE(address_key("192.0.2.1", 64), address_key("192.0.2.2", 64));
  // IPv4-mapped stays IPv4 (a dual-stack listener's IPv4 clients).
  EXPECT_EQ(address_key("::ffff:192.0.2.1", 64), "192.0.2.1");
  EXPECT_EQ(address_key("not-an-ip", 64), "not-an-ip");
}

TEST(address_key, one_64_fills_one_cap) {
  ip_table t{2, 0, 0};
  EXPECT_EQ(t.admit(address_key("2001:db8::1", 64)), ip_table::verdict::admitted);
  EXPECT_EQ(t.admit(address_key("2001:db8::2", 64)), ip_table::verdict::admitted);
  EXPECT_EQ(t.admit(address_key("2001:db8::3", 64)), ip_table::verdict::too_many);
  EXPECT_EQ(t.admit(address_key("2001:db8:0:1::3", 64)), ip_table::verdict::admitted);
}

struct fake_session {};

TEST(unauth_queue, hands_out_the_oldest_old_enough_session_once) {
  unauth_queue<fake_session> q;
  auto now = unauth_queue<fake_session>::clock::now();
  auto a = std::make_shared<fake_session>(), b = std::make_shared<fake_session>(),
       c = std::make_shared<fake_session>();
  q.add(a.get(), a, now);
  q.add(b.get(), b, now + 1s);
  q.add(c.get(), c, now + 2s);
  // None joined at or before the cutoff: nobody is old enough.
  EXPECT_TRUE(q.take_oldest(now - 1ms).expired());
  EXPECT_EQ(q.take_oldest(now + 5s).lock(), a);
  // b authenticated: no longer a candidate.
  q.remove(b.get());
  EXPECT_TRUE(q.take_oldest(now + 1s).expired());
  EXPECT_EQ(q.take_oldest(now + 5s).lock(), c);
  EXPECT_TRUE(q.take_oldest(now + 5s).expired());
  EXPECT_EQ(q.size(), 0u);
}

TEST(unauth_queue, skips_and_forgets_sessions_that_are_gone) {
  unauth_queue<fake_session> q;
  auto now = unauth_queue<fake_session>::clock::now();
  auto a = std::make_shared<fake_session>(), b = std::make_shared<fake_session>();
  q.add(a.get(), a, now);
  q.add(b.get(), b, now + 3s);
  a.reset();  // destroyed without authenticating
  // A dead oldest does not shield the live ones behind it from the cutoff.
  EXPECT_TRUE(q.take_oldest(now + 1s).expired());
  EXPECT_EQ(q.size(), 1u);
  EXPECT_EQ(q.take_oldest(now + 3s).lock(), b);
}

TEST(unauth_queue, a_sweep_bounds_what_dead_sessions_leave_behind) {
  unauth_queue<fake_session> q;
  auto now = unauth_queue<fake_session>::clock::now();
  // Keys that stay distinct (no address reuse) while the sessions die.
  std::vector<fake_session> dead_keys(3000), live_keys(2200);
  std::vector<std::shared_ptr<fake_session>> live;
  for (auto& k : dead_keys) {
    std::shared_ptr<fake_session> s{&k, [](fake_session*) {}};
    q.add(&k, s, now);
  }  // destroyed unauthenticated: they never call remove()
  for (auto& k : live_keys) {
    live.emplace_back(&k, [](fake_session*) {});
    q.add(&k, live.back(), now);
  }
  EXPECT_EQ(q.size(), live.size());
}

TEST(ip_table, caps_open_connections_per_address) {
  ip_table t{3, 0, 0};
  for (int i = 0; i < 3; ++i)
    EXPECT_EQ(t.admit("a"), ip_table::verdict::admitted);
  EXPECT_EQ(t.admit("a"), ip_table::verdict::too_many);
  EXPECT_EQ(t.admit("b"), ip_table::verdict::admitted);
  t.release("a");
  EXPECT_EQ(t.open("a"), 2u);
  EXPECT_EQ(t.admit("a"), ip_table::verdict::admitted);
  EXPECT_EQ(t.admit("a"), ip_table::verdict::too_many);
}

TEST(ip_table, bucket_refills_at_its_rate) {
  ip_table t{0, 2, 4};  // 2/s, burst 4
  auto now = ip_table::clock::now();
  for (int i = 0; i < 4; ++i)
    EXPECT_EQ(t.admit("a", now), ip_table::verdict::admitted);
  EXPECT_EQ(t.admit("a", now), ip_table::verdict::too_fast);
  EXPECT_EQ(t.admit("a", now + 499ms), ip_table::verdict::too_fast);
  EXPECT_EQ(t.admit("a", now + 600ms), ip_table::verdict::admitted);
  // Refused connections do not take a slot.
  EXPECT_EQ(t.open("a"), 5u);
  // Another address has its own bucket.
  EXPECT_EQ(t.admit("b", now), ip_table::verdict::admitted);
}

TEST(ip_table, transfer_moves_a_slot_without_a_token) {
  ip_table t{1, 1, 1};
  auto now = ip_table::clock::now();
  EXPECT_EQ(t.admit("a", now), ip_table::verdict::admitted);
  EXPECT_EQ(t.transfer("a", "b"), ip_table::verdict::admitted);
  EXPECT_EQ(t.open("a"), 0u);
  EXPECT_EQ(t.open("b"), 1u);
  EXPECT_EQ(t.admit("b", now), ip_table::verdict::too_many);
}

TEST(ip_table, forgets_idle_addresses) {
  ip_table t{0, 1000, 1};
  auto now = ip_table::clock::now();
  for (int i = 0; i < 3000; ++i) {
    auto ip = "x" + std::to_string(i);
    ASSERT_EQ(t.admit(ip, now), ip_table::verdict::admitted);
    t.release(ip);
  }
  // Sweeps run as admissions go; a full bucket and nothing open is forgotten.
  for (int i = 0; i < 2100; ++i)
    t.admit("y", now + 10s) == ip_table::verdict::admitted ? t.release("y") : void();
  EXPECT_LT(t.size(), 100u);
}

}  // namespace
