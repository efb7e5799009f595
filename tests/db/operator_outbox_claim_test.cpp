// Operator listeners, the db layer (docs/delivery.md, "Outbox"): the claims and
// fenced completions of the delivery supervisor (SKIP LOCKED, leases, retries,
// attempts, retention, lost access, turns between listeners). The rows written
// in the event's transaction: operator_outbox_write_test.cpp. Fixture:
// operator_outbox_fixture.hpp.

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "db/membership_store.hpp"
#include "db/operator_outbox.hpp"
#include "db/session.hpp"
#include "tests/db/operator_outbox_fixture.hpp"

namespace waggle::pgtest {
namespace {

// ---- claims and completions -------------------------------------------------------------

TEST_F(OutboxTest, ClaimReturnsWhatADeliveryNeeds) {
  auto c = community();
  register_targets(c, listener1, {target1});
  auto evs = seed(c, 1);
  auto claimed = db::claim_deliveries(conn(), {listener1}, 10);
  ASSERT_EQ(claimed.size(), 1u);
  const auto& d = claimed[0];
  EXPECT_EQ(d.listener, listener1);
  EXPECT_EQ(d.target, target1);
  EXPECT_EQ(d.community_id, c);
  EXPECT_NE(d.community_host.find(".test"), std::string::npos);
  EXPECT_EQ(d.event_raw, evs[0].raw);
  EXPECT_EQ(d.attempts, 1);
  EXPECT_EQ(d.delivery_id.size(), 36u);
  EXPECT_EQ(d.claim_id.size(), 36u);
  EXPECT_NEAR(d.created_at, wall_now(), 60);
  EXPECT_EQ(outbox_rows(c, "state = 'sending'"), 1);
  EXPECT_TRUE(db::claim_deliveries(conn(), {listener1}, 10).empty()) << "leased";
}

// The delivery store's connection runs claim_session_setup first (generic
// plans, no sequential scans, the access function compiled and planned before
// any wake needs it): every statement of it runs on a migrated database, and a
// claim on such a connection still finds its row and drops one it may not read.
TEST_F(OutboxTest, AConnectionSetUpAsTheStoreDoesClaimsAsAnyOther) {
  db::session store{url(), "delivery-store-test", db::claim_session_setup()};
  auto* sc = store.get();
  ASSERT_NE(sc, nullptr) << "a setup statement failed";
  EXPECT_EQ(pqxx::nontransaction{*sc}.exec("SHOW plan_cache_mode")[0][0].as<std::string>(),
            "force_generic_plan");
  auto c = community();
  register_targets(c, listener1, {target1});
  auto evs = seed(c, 2);
  {
    pqxx::nontransaction tx(conn());
    tx.exec("UPDATE events SET deleted_at = now() WHERE id = decode('" + evs[1].id + "', 'hex')");
  }
  auto claimed = db::claim_deliveries(*sc, {listener1}, 10);
  ASSERT_EQ(claimed.size(), 1u);
  EXPECT_EQ(claimed[0].event_raw, evs[0].raw);
  EXPECT_EQ(outbox_rows(c, "true"), 1) << "the deleted event's row is dropped, not claimed";
}

// Claimer A holds its claim transaction open; B must skip A's row, not wait
// for it (lock_timeout turns a wait into a failure) and not take it.
TEST_F(OutboxTest, ConcurrentClaimersNeverGetTheSameRow) {
  auto c = community();
  register_targets(c, listener1, {target1});
  seed(c, 3);
  auto a = connect();
  auto b = connect();
  pqxx::nontransaction(*b).exec("SET lock_timeout = '2s'");
  pqxx::work ta(*a);
  auto got_a = db::claim_deliveries(ta, {listener1}, 1);
  ASSERT_EQ(got_a.size(), 1u);
  auto got_b = db::claim_deliveries(*b, {listener1}, 10);
  ta.commit();
  ASSERT_EQ(got_b.size(), 2u);
  for (const auto& r : got_b)
    EXPECT_NE(r.id, got_a[0].id);
  EXPECT_EQ(outbox_rows(c, "state = 'sending'"), 3);
}

TEST_F(OutboxTest, ExpiredClaimIsReclaimedAndTheOldClaimIsFenced) {
  auto c = community();
  register_targets(c, listener1, {target1});
  seed(c, 1);
  db::claim_settings expired;
  expired.lease = 0s;
  auto first = db::claim_deliveries(conn(), {listener1}, 10, expired);
  ASSERT_EQ(first.size(), 1u);
  auto second = db::claim_deliveries(conn(), {listener1}, 10);
  ASSERT_EQ(second.size(), 1u);
  EXPECT_EQ(second[0].id, first[0].id);
  EXPECT_EQ(second[0].delivery_id, first[0].delivery_id) << "stable across retries";
  EXPECT_NE(second[0].claim_id, first[0].claim_id);
  EXPECT_EQ(second[0].attempts, 2);
  for (auto how : {db::completion::delivered, db::completion::retry, db::completion::terminal})
    EXPECT_EQ(db::complete_delivery(conn(), first[0], how, 0ms), db::completion_result::fenced);
  EXPECT_EQ(outbox_rows(c, "state = 'sending' AND claim_id = '" + second[0].claim_id +
                             "' AND attempts = 2 AND lease_until > now()"), 1)
    << "a fenced completion changes nothing";
  EXPECT_EQ(db::complete_delivery(conn(), second[0], db::completion::delivered, 0ms),
            db::completion_result::done);
  EXPECT_EQ(outbox_rows(c), 0);
}

TEST_F(OutboxTest, RetryIsNotClaimableBeforeItsTime) {
  auto c = community();
  register_targets(c, listener1, {target1});
  seed(c, 1);
  auto first = db::claim_deliveries(conn(), {listener1}, 10);
  ASSERT_EQ(first.size(), 1u);
  EXPECT_EQ(db::complete_delivery(conn(), first[0], db::completion::retry, 3600s),
            db::completion_result::done);
  EXPECT_EQ(outbox_rows(c, "state = 'pending' AND claim_id IS NULL AND "
                           "next_attempt_at > now() + interval '3590 seconds'"), 1);
  EXPECT_TRUE(db::claim_deliveries(conn(), {listener1}, 10).empty());
  EXPECT_EQ(db::complete_delivery(conn(), first[0], db::completion::delivered, 0ms),
            db::completion_result::fenced) << "a pending row has no claim to complete";
  sql("UPDATE operator_listener_outbox SET next_attempt_at = now() - interval '1 second' "
      "WHERE community_id = " + std::to_string(c));
  auto again = db::claim_deliveries(conn(), {listener1}, 10);
  ASSERT_EQ(again.size(), 1u);
  EXPECT_EQ(again[0].attempts, 2);
}

TEST_F(OutboxTest, MaxAttemptsDrops) {
  auto c = community();
  register_targets(c, listener1, {target1});
  seed(c, 1);
  db::claim_settings s;
  s.max_attempts = 2;
  s.lease = 0s;
  auto one = db::claim_deliveries(conn(), {listener1}, 10, s);
  ASSERT_EQ(one.size(), 1u);
  EXPECT_EQ(db::complete_delivery(conn(), one[0], db::completion::retry, 0ms, s),
            db::completion_result::done);
  auto two = db::claim_deliveries(conn(), {listener1}, 10, s);
  ASSERT_EQ(two.size(), 1u);
  EXPECT_EQ(two[0].attempts, 2);
  EXPECT_TRUE(db::claim_deliveries(conn(), {listener1}, 10, s).empty())
    << "an expired claim at max_attempts is not claimed again";
  EXPECT_EQ(db::complete_delivery(conn(), two[0], db::completion::retry, 0ms, s),
            db::completion_result::dropped);
  EXPECT_EQ(outbox_rows(c), 0);
}

TEST_F(OutboxTest, RowsPastTheRetentionAreNotClaimedAndAreReaped) {
  auto c = community();
  register_targets(c, listener1, {target1});
  seed(c, 2);
  auto claimed = db::claim_deliveries(conn(), {listener1}, 1);
  ASSERT_EQ(claimed.size(), 1u);
  sql("UPDATE operator_listener_outbox SET created_at = now() - interval '16 minutes' "
      "WHERE community_id = " + std::to_string(c));
  EXPECT_TRUE(db::claim_deliveries(conn(), {listener1}, 10).empty());
  EXPECT_EQ(db::complete_delivery(conn(), claimed[0], db::completion::retry, 0ms),
            db::completion_result::dropped);
  EXPECT_EQ(outbox_rows(c), 1);
  EXPECT_EQ(db::reap_outbox(conn(), 900s), 1u);
  EXPECT_EQ(outbox_rows(c), 0);
}

TEST_F(OutboxTest, RowsOfOtherListenersAreNotClaimed) {
  auto c = community();
  register_targets(c, listener1, {target1});
  register_targets(c, listener2, {target1});
  seed(c, 2);
  auto mine = db::claim_deliveries(conn(), {listener1}, 10);
  ASSERT_EQ(mine.size(), 2u);
  for (const auto& r : mine)
    EXPECT_EQ(r.listener, listener1);
  EXPECT_EQ(outbox_rows(c, "state = 'pending' AND listener_pubkey = decode('" + listener2 +
                             "', 'hex')"), 2);
  EXPECT_EQ(db::claim_deliveries(conn(), {listener2, listener1}, 10).size(), 2u);
}

TEST_F(OutboxTest, RowsOfDeletedEventsAreRemovedOnClaim) {
  auto c = community();
  register_targets(c, listener1, {target1});
  auto evs = seed(c, 3);
  // NIP-09 by its author, a soft delete; and a row gone altogether (reaped).
  EXPECT_EQ(write1(c, make_event(1, 5, 2000, {{"e", evs[0].id}})), write_outcome::stored);
  EXPECT_FALSE(is_live(c, evs[0].id));
  sql("DELETE FROM events WHERE community_id = " + std::to_string(c) + " AND id = decode('" +
      evs[1].id + "', 'hex')");
  auto claimed = db::claim_deliveries(conn(), {listener1}, 10);
  ASSERT_EQ(claimed.size(), 1u);
  EXPECT_EQ(claimed[0].event_raw, evs[2].raw);
  EXPECT_EQ(outbox_rows(c), 1);
}

TEST_F(OutboxTest, OutboxStateForTheGauge) {
  auto c = community();
  register_targets(c, listener1, {target1});
  EXPECT_EQ(db::read_outbox_state(conn(), {listener1}).rows, 0u);
  EXPECT_FALSE(db::read_outbox_state(conn(), {listener1}).next_due_in_seconds);
  seed(c, 2);
  sql("UPDATE operator_listener_outbox SET created_at = now() - interval '60 seconds' "
      "WHERE community_id = " + std::to_string(c));
  auto claimed = db::claim_deliveries(conn(), {listener1}, 1);
  ASSERT_EQ(claimed.size(), 1u);
  auto st = db::read_outbox_state(conn(), {listener1});
  EXPECT_EQ(st.rows, 2u);
  EXPECT_NEAR(st.oldest_age_seconds, 60, 10);
  ASSERT_TRUE(st.next_due_in_seconds);
  EXPECT_LE(*st.next_due_in_seconds, 0.5);
  EXPECT_EQ(db::read_outbox_state(conn(), {listener2}).rows, 0u);
}

// A listener that may no longer read the community (removed from a closed
// one, or banned from an open one) is sent none of its events: the claim
// deletes those rows instead.
TEST_F(OutboxTest, ClaimsSkipListenersThatLostAccess) {
  auto closed = community("closed");
  sql("UPDATE communities SET policy = 'closed' WHERE id = " + std::to_string(closed));
  ASSERT_TRUE(db::add_member(conn(), closed, listener1, member_role::member, ""));
  ASSERT_TRUE(db::add_member(conn(), closed, listener2, member_role::member, ""));
  ASSERT_TRUE(db::add_member(conn(), closed, make_event(1, 1, 1, {}, "").pubkey,
                             member_role::member, ""));  // the author of seed()
  register_targets(closed, listener1, {target1});
  register_targets(closed, listener2, {target1});
  seed(closed, 1);
  ASSERT_EQ(outbox_rows(closed), 2);
  sql("UPDATE community_members SET removed_at = now() WHERE community_id = " +
      std::to_string(closed) + " AND pubkey = decode('" + listener2 + "', 'hex')");
  EXPECT_TRUE(db::claim_deliveries(conn(), {listener2}, 10).empty());
  EXPECT_EQ(outbox_rows(closed), 1);
  EXPECT_EQ(db::claim_deliveries(conn(), {listener1}, 10).size(), 1u);

  auto open = community("open");
  register_targets(open, listener1, {target2});
  write(open, {make_event(1, 9, 5000, {{"p", target2}}, "to the banned one")});
  sql("INSERT INTO community_banned_pubkeys (community_id, pubkey) VALUES (" +
      std::to_string(open) + ", decode('" + listener1 + "', 'hex'))");
  EXPECT_TRUE(db::claim_deliveries(conn(), {listener1}, 10).empty());
  EXPECT_EQ(outbox_rows(open), 0);
}

// Rows no claim can take (past the retention, or out of attempts) are never
// "due": the supervisor arms its next claim from this, and would claim in a
// loop until the reaper took them.
TEST_F(OutboxTest, RowsNoClaimCanTakeAreNeverDue) {
  auto c = community();
  register_targets(c, listener1, {target1});
  seed(c, 2);
  const auto in_c = " WHERE community_id = " + std::to_string(c);
  sql("UPDATE operator_listener_outbox SET created_at = now() - interval '20 minutes'" + in_c +
      " AND id = (SELECT min(id) FROM operator_listener_outbox" + in_c + ")");
  sql("UPDATE operator_listener_outbox SET attempts = 9" + in_c +
      " AND id = (SELECT max(id) FROM operator_listener_outbox" + in_c + ")");
  EXPECT_TRUE(db::claim_deliveries(conn(), {listener1}, 10).empty());
  auto st = db::read_outbox_state(conn(), {listener1});
  EXPECT_EQ(st.rows, 2u);
  EXPECT_FALSE(st.next_due_in_seconds) << *st.next_due_in_seconds;
}

// Red-team D0: a mention posted in a private channel reaches only a listener
// that could read the channel itself (an active member); registering the
// channel's members as targets gives a community member who is not in the
// channel nothing (no row is written for it, and a row written before it
// left is deleted at claim time). Open channels reach every listener that may read the
// community; a deleted channel's mentions reach nobody.
TEST_F(OutboxTest, PrivateChannelMentionsReachOnlyListenersInTheChannel) {
  auto c = community();
  const auto author = make_event(1, 1, 1, {}, "").pubkey;
  const auto cid = std::to_string(c);
  auto channel = [&](const std::string& id, const std::string& visibility) {
    sql("INSERT INTO channels (community_id, id, visibility, created_by) VALUES (" + cid + ", '" +
        id + "', '" + visibility + "', decode('" + author + "', 'hex'))");
    sql("INSERT INTO channel_members (community_id, channel_id, pubkey, role, added_by) VALUES (" +
        cid + ", '" + id + "', decode('" + author + "', 'hex'), 'owner', decode('" + author +
        "', 'hex'))");
  };
  channel("secret", "private");
  channel("lobby", "open");
  channel("gone", "open");
  sql("INSERT INTO channel_members (community_id, channel_id, pubkey, role, added_by) VALUES (" +
      cid + ", 'secret', decode('" + listener2 + "', 'hex'), 'bot', decode('" + author +
      "', 'hex'))");
  register_targets(c, listener1, {target1});
  register_targets(c, listener2, {target1});
  auto in = [&](const std::string& ch, int64_t at) {
    auto ev = make_event(1, 9, at, {{"h", ch}, {"p", target1}}, "in " + ch);
    EXPECT_EQ(write1(c, ev), write_outcome::stored) << ch;
    return ev;
  };
  auto secret = in("secret", 1000);
  in("lobby", 1001);
  in("gone", 1002);
  EXPECT_EQ(rows_of(c, listener1, target1, secret.id), 0) << "not even written for listener1";
  ASSERT_EQ(outbox_rows(c), 5);
  sql("UPDATE channels SET deleted_at = now() WHERE community_id = " + cid + " AND id = 'gone'");

  auto channels_of = [&](const std::vector<db::claimed_delivery>& rows) {
    std::vector<std::string> out;
    for (const auto& r : rows)
      out.push_back(r.event_raw.find("in secret") != std::string::npos  ? "secret"
                    : r.event_raw.find("in lobby") != std::string::npos ? "lobby"
                                                                        : "gone");
    std::sort(out.begin(), out.end());
    return out;
  };
  EXPECT_EQ(channels_of(db::claim_deliveries(conn(), {listener1}, 10)),
            std::vector<std::string>{"lobby"});
  EXPECT_EQ(channels_of(db::claim_deliveries(conn(), {listener2}, 10)),
            (std::vector<std::string>{"lobby", "secret"}));
  EXPECT_EQ(outbox_rows(c), 3) << "the deleted channel's two rows are deleted, never sent";

  // Removed from the channel after the row was written: not sent either.
  auto later = in("secret", 1003);
  sql("UPDATE channel_members SET removed_at = now(), removed_by = decode('" + author +
      "', 'hex') WHERE community_id = " + cid + " AND channel_id = 'secret' AND pubkey = decode('" +
      listener2 + "', 'hex')");
  EXPECT_TRUE(db::claim_deliveries(conn(), {listener2}, 10).empty());
  EXPECT_EQ(rows_of(c, listener2, target1, later.id), 0);
}

// Red-team D1: claims take listeners in turns (every listener's oldest due
// row, then every listener's second, ...) and never more of one listener's
// than its room, so one listener's backlog cannot fill every free slot.
TEST_F(OutboxTest, ClaimsTakeListenersInTurnsWithinTheirRoom) {
  using rooms = std::vector<db::listener_room>;
  auto c = community();
  register_targets(c, listener1, {target1});
  register_targets(c, listener2, {target2});
  std::vector<proto::event> evs;
  for (int i = 0; i < 10; ++i)  // listener1's backlog, due first
    evs.push_back(make_event(1, 9, 1000 + i, {{"p", target1}}, "one " + std::to_string(i)));
  for (int i = 0; i < 3; ++i)
    evs.push_back(make_event(1, 9, 2000 + i, {{"p", target2}}, "two " + std::to_string(i)));
  for (size_t i = 0; i < evs.size(); ++i)  // one batch each, so listener1's rows are due first
    ASSERT_EQ(write1(c, evs[i]), write_outcome::stored);
  auto count_of = [](const std::vector<db::claimed_delivery>& rows, const std::string& l) {
    return std::count_if(rows.begin(), rows.end(),
                         [&](const db::claimed_delivery& r) { return r.listener == l; });
  };
  pqxx::work tx(conn());
  auto first = db::claim_deliveries(tx, rooms{{listener1, 4}, {listener2, 4}}, 4);
  EXPECT_EQ(count_of(first, listener1), 2) << "in turns, not the four due first";
  EXPECT_EQ(count_of(first, listener2), 2);
  tx.abort();

  pqxx::work tx2(conn());
  auto roomy = db::claim_deliveries(tx2, rooms{{listener1, 1}, {listener2, 4}}, 4);
  EXPECT_EQ(count_of(roomy, listener1), 1) << "listener1 has room for one";
  EXPECT_EQ(count_of(roomy, listener2), 3);
  auto none = db::claim_deliveries(tx2, rooms{{listener1, 0}}, 4);
  EXPECT_TRUE(none.empty()) << "no room, no claim";
  tx2.abort();

  // The due reading for the next claim counts only listeners with room.
  const std::vector<std::string> only2{listener2};
  auto st = db::read_outbox_state(conn(), {listener1, listener2}, {}, &only2);
  ASSERT_TRUE(st.next_due_in_seconds);
  db::claim_deliveries(conn(), rooms{{listener2, 4}}, 4);
  st = db::read_outbox_state(conn(), {listener1, listener2}, {}, &only2);
  ASSERT_TRUE(st.next_due_in_seconds);
  EXPECT_GT(*st.next_due_in_seconds, 20.0)
    << "only listener2's leases count; listener1's due rows do not arm a claim it has no room for";
  EXPECT_EQ(st.rows, 13u);
}

// Red-team R14-1 (issue 34): one listener serving two communities. A flood
// of mentions in one, due first, must not fill the listener's room while the
// other's mention waits: the claim takes the listener's communities in turns.
// Red before migration 0016: the four claimed were the flood's four oldest.
TEST_F(OutboxTest, AFloodInOneCommunityDoesNotDelayTheSameListenerInAnother) {
  using rooms = std::vector<db::listener_room>;
  auto flooded = community();
  auto quiet = community();
  register_targets(flooded, listener1, {target1});
  register_targets(quiet, listener1, {target1});
  for (int i = 0; i < 30; ++i)  // one batch each, so the flood's rows are due first
    ASSERT_EQ(write1(flooded, make_event(1, 9, 1000 + i, {{"p", target1}}, "flood " + std::to_string(i))),
              write_outcome::stored);
  ASSERT_EQ(write1(quiet, make_event(2, 9, 2000, {{"p", target1}}, "are you there?")),
            write_outcome::stored);
  auto of = [](const std::vector<db::claimed_delivery>& rows, int64_t c) {
    return std::count_if(rows.begin(), rows.end(),
                         [&](const db::claimed_delivery& r) { return r.community_id == c; });
  };
  auto first = db::claim_deliveries(conn(), rooms{{listener1, 4}}, 16);
  ASSERT_EQ(first.size(), 4u) << "the listener's room";
  EXPECT_EQ(of(first, quiet), 1) << "the quiet community's mention waited behind the flood";
  EXPECT_EQ(of(first, flooded), 3);
  // With the quiet one served, the flood takes the whole room.
  auto second = db::claim_deliveries(conn(), rooms{{listener1, 4}}, 16);
  EXPECT_EQ(of(second, flooded), 4);
  // Oldest first within the flood: what the first claim took is older than the second's.
  int64_t newest_first = 0, oldest_second = INT64_MAX;
  for (const auto& r : first)
    if (r.community_id == flooded)
      newest_first = std::max(newest_first, r.id);
  for (const auto& r : second)
    oldest_second = std::min(oldest_second, r.id);
  EXPECT_LT(newest_first, oldest_second);
}

// Red team of issue 34: the skip scan ran as PL/pgSQL, which after a few
// calls keeps a GENERIC plan; `(v_at IS NULL OR community_id > v_at)` was then
// a filter over all of the listener's rows, so a flood in the listener's
// lowest community was read on every probe of every claim. Forced generic
// here: no probe may remove a flood's worth of rows by filter.
TEST_F(OutboxTest, TheCommunityWalkStaysAnIndexWalkUnderAGenericPlan) {
  auto flooded = community();
  auto quiet = community();
  ASSERT_LT(flooded, quiet) << "the flood must sit in the listener's lowest community";
  sql("INSERT INTO operator_listener_outbox (community_id, listener_pubkey, target_pubkey, event_id, "
      "event_kind, event_created_at, next_attempt_at) "
      "SELECT " + std::to_string(flooded) + ", decode('" + listener1 + "', 'hex'), decode('" + target1 +
      "', 'hex'), sha256(i::text::bytea), 9, 1000, now() + interval '1 hour' "
      "FROM generate_series(1, 3000) AS i");
  sql("INSERT INTO operator_listener_outbox (community_id, listener_pubkey, target_pubkey, event_id, "
      "event_kind, event_created_at) VALUES (" + std::to_string(quiet) + ", decode('" + listener1 +
      "', 'hex'), decode('" + target1 + "', 'hex'), sha256('q'::bytea), 9, 1000)");
  sql("ANALYZE operator_listener_outbox");
  auto probe = connect();
  notice_collector notices(*probe);
  {
    pqxx::nontransaction tx(*probe);
    tx.exec("SET plan_cache_mode = force_generic_plan");
    tx.exec("LOAD 'auto_explain'");
    tx.exec("SET auto_explain.log_min_duration = 0");
    tx.exec("SET auto_explain.log_analyze = on");
    tx.exec("SET auto_explain.log_nested_statements = on");
    tx.exec("SET auto_explain.log_level = 'notice'");
    tx.exec("SET client_min_messages = 'notice'");
  }
  for (int i = 0; i < 8; ++i) {
    pqxx::nontransaction tx(*probe);
    auto r = tx.exec_params("SELECT community_id FROM waggle_listener_due_communities("
                            "decode($1, 'hex'), 9, 900, 16)",
                            listener1);
    ASSERT_EQ(r.size(), 1u);
    EXPECT_EQ(r[0][0].as<int64_t>(), quiet);
  }
  auto text = notices.text();
  for (size_t at = text.find("Rows Removed by Filter: "); at != std::string::npos;
       at = text.find("Rows Removed by Filter: ", at + 1)) {
    auto removed = std::stoll(text.substr(at + 24));
    EXPECT_LT(removed, 100) << "a probe read the flood:\n" << text.substr(at > 2000 ? at - 2000 : 0, 2400);
  }
}

// Red-team D1: one event names at most max_deliveries_per_event registered
// targets' listeners; the first ones in tag order.
TEST_F(OutboxTest, OneEventMakesAtMostTheCapOfDeliveriesInTagOrder) {
  auto c = community();
  std::vector<std::string> targets;
  std::vector<proto::tag> tags;
  for (int i = 0; i < 40; ++i) {
    char buf[65];
    std::snprintf(buf, sizeof buf, "%064x", 0xbeef00 + (39 - i));  // descending: tag order != key order
    targets.push_back(buf);
    tags.push_back({"p", buf});
  }
  register_targets(c, listener1, targets);
  auto ev = mention(1000, tags);
  ASSERT_EQ(write1(c, ev), write_outcome::stored);
  EXPECT_EQ(outbox_rows(c), static_cast<int64_t>(db::max_deliveries_per_event));
  EXPECT_EQ(rows_of(c, listener1, targets.front(), ev.id), 1) << "the first named is kept";
  EXPECT_EQ(rows_of(c, listener1, targets.back(), ev.id), 0) << "the 40th is past the cap";
}

}  // namespace
}  // namespace waggle::pgtest
