// NIP-29 channels in the database (db/group_store.hpp), what the relay does on its
// own: the relay-signed roster (39000-39002) through db::publish_roster, a roster
// of 1,501 members repaired after a truncated one, read access
// (db::read_channel_access) and the TTL reaper (db::archive_expired_channels).
// Fixture: group_store_fixture.hpp.

#include <algorithm>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "tests/db/group_store_fixture.hpp"

namespace waggle::pgtest {
namespace {

// ---- 10. publish_roster -----------------------------------------------------------------

TEST_F(GroupStoreTest, PublishRosterStoresTheThreeRelaySignedHeads) {
  auto c = community();
  make_channel(c, "room", {{"name", "Room"}, {"about", "hello"}});
  ASSERT_EQ(run(c, owner, nip29::kind_put_user, "room", {{"p", pk(other), "guest"}}).result.outcome,
            write_outcome::stored);
  ASSERT_EQ(run(c, owner, nip29::kind_put_user, "room", {{"p", pk(outsider), "bot"}}).result.outcome,
            write_outcome::stored);
  ASSERT_EQ(run(c, owner, nip29::kind_remove_user, "room", {{"p", pk(outsider)}}).result.outcome,
            write_outcome::stored);

  const int64_t now = next_ts() + 1000;
  auto pub = publish(c, "room", now);
  ASSERT_EQ(pub.events.size(), 3u);
  EXPECT_EQ(pub.members.size(), 4u);

  std::map<std::string, std::string> expected_roles{{pk(owner), "owner"},
                                                    {pk(admin), "admin"},
                                                    {pk(member), "member"},
                                                    {pk(other), "guest"}};
  for (int32_t kind : {39000, 39001, 39002}) {
    const auto* ev = find_kind(pub.events, kind);
    ASSERT_NE(ev, nullptr) << kind;
    EXPECT_EQ(ev->pubkey, relay().pubkey);
    EXPECT_TRUE(proto::verify_signature(*ev)) << kind;
    EXPECT_EQ(d_of(*ev), "room");
    EXPECT_EQ(ev->created_at, now);
    EXPECT_EQ(live_heads(c, "room", kind), 1) << kind;
    EXPECT_EQ(live_head_raw(c, "room", kind), ev->raw) << kind;
    EXPECT_EQ(event_channel(c, ev->id), std::optional<std::string>("<null>"))
      << "relay-signed state is addressed by d, not filed into the channel";
  }

  // 39002: ["d", ch] then ["p", hex, "", role] for every active member, by pubkey.
  std::vector<proto::tag> members{{"d", "room"}};
  for (const auto& [key, role] : expected_roles)  // std::map: sorted by pubkey
    members.push_back({"p", key, "", role});
  EXPECT_EQ(find_kind(pub.events, 39002)->tags, members);
  // 39001: owners and admins, ["p", hex, role].
  std::vector<proto::tag> admins{{"d", "room"}};
  for (const auto& [key, role] : expected_roles)
    if (role == "owner" || role == "admin")
      admins.push_back({"p", key, role});
  EXPECT_EQ(find_kind(pub.events, 39001)->tags, admins);
  // 39000: the metadata.
  const auto& md = find_kind(pub.events, 39000)->tags;
  EXPECT_NE(std::find(md.begin(), md.end(), proto::tag{"name", "Room"}), md.end());
  EXPECT_NE(std::find(md.begin(), md.end(), proto::tag{"about", "hello"}), md.end());
  EXPECT_NE(std::find(md.begin(), md.end(), proto::tag{"public"}), md.end());

  // The stored JSON parses back to the same event.
  auto parsed = proto::parse_event(live_head_raw(c, "room", 39002));
  ASSERT_TRUE(parsed.has_value());
  EXPECT_EQ(parsed->tags, members);

  // A change, then a republish with the same `now`: created_at = previous + 1,
  // and exactly one live head per kind.
  ASSERT_EQ(run(c, admin, nip29::kind_remove_user, "room", {{"p", pk(other)}}).result.outcome,
            write_outcome::stored);
  auto second = publish(c, "room", now);
  ASSERT_EQ(second.events.size(), 3u);
  for (int32_t kind : {39000, 39001, 39002}) {
    EXPECT_EQ(find_kind(second.events, kind)->created_at, now + 1) << kind;
    EXPECT_EQ(live_heads(c, "room", kind), 1) << kind;
    EXPECT_EQ(live_head_raw(c, "room", kind), find_kind(second.events, kind)->raw) << kind;
    EXPECT_FALSE(is_live(c, find_kind(pub.events, kind)->id)) << kind;
    EXPECT_EQ(version_times(c, "room", kind).size(), 2u) << kind;
  }
  EXPECT_EQ(p_tag_count(*find_kind(second.events, 39002)), 3u);
  EXPECT_EQ(second.members.count(pk(other)), 0u);

  // An older `now` still moves forward.
  auto third = publish(c, "room", now - 500);
  ASSERT_EQ(third.events.size(), 3u);
  for (const auto& ev : third.events)
    EXPECT_EQ(ev->created_at, now + 2);

  // After a soft-deleted head newer than `now`, the next version is still
  // newer than every stored one (so it can never reproduce a deleted id).
  auto future = publish(c, "room", now + 5000);
  ASSERT_EQ(future.events.size(), 3u);
  sql("UPDATE events SET deleted_at = now() WHERE community_id = " + std::to_string(c) +
      " AND kind = 39002 AND d_tag = 'room' AND deleted_at IS NULL");
  ASSERT_EQ(live_heads(c, "room", 39002), 0);
  auto after_delete = publish(c, "room", now);
  ASSERT_EQ(after_delete.events.size(), 3u);
  for (int32_t kind : {39000, 39001, 39002}) {
    const auto* ev = find_kind(after_delete.events, kind);
    EXPECT_EQ(ev->created_at, now + 5001) << kind;
    auto times = version_times(c, "room", kind);
    EXPECT_EQ(times.back(), ev->created_at) << kind;
    EXPECT_EQ(std::count(times.begin(), times.end(), times.back()), 1) << kind;
    EXPECT_EQ(live_heads(c, "room", kind), 1) << kind;
  }

  // A channel that does not exist publishes nothing.
  auto none = publish(c, "no-such-room", now);
  EXPECT_TRUE(none.events.empty());
  EXPECT_TRUE(none.members.empty());
}

// ---- 11. 1,501 members ------------------------------------------------------------------

TEST_F(GroupStoreTest, RosterOf1501MembersIsPublishedWholeAndRepairedAfterATruncatedOne) {
  auto c = community();
  ASSERT_EQ(run(c, owner, nip29::kind_create_group, "crowd").result.outcome, write_outcome::stored);
  sql("INSERT INTO channel_members (community_id, channel_id, pubkey, role, added_by) "
      "SELECT " + std::to_string(c) + ", 'crowd', decode(lpad(to_hex(i), 64, '0'), 'hex'), 'member', "
      "       decode('" + pk(owner) + "', 'hex') "
      "  FROM generate_series(1, 1500) AS i");
  ASSERT_EQ(active_members(c, "crowd"), 1501);

  const int64_t now = next_ts();
  auto pub = publish(c, "crowd", now);
  ASSERT_EQ(pub.events.size(), 3u);
  EXPECT_EQ(pub.members.size(), 1501u);
  auto stored = proto::parse_event(live_head_raw(c, "crowd", 39002));
  ASSERT_TRUE(stored.has_value()) << stored.error().reason;
  EXPECT_EQ(p_tag_count(*stored), 1501u);
  EXPECT_TRUE(proto::verify_signature(*stored));
  EXPECT_TRUE(stale_channels(c).empty());

  // An old node's capped snapshot (first 1,000 members), newer than the
  // head, written past the fence: it replaces the head the way any writer does.
  proto::event capped;
  capped.kind = 39002;
  capped.created_at = stored->created_at + 1;
  capped.tags.assign(stored->tags.begin(), stored->tags.begin() + 1 + 1000);  // d + 1,000 p
  proto::sign(capped, relay().secret);
  ASSERT_EQ(p_tag_count(capped), 1000u);
  {
    pqxx::work tx(conn());
    // An old relay without the fence: neither of its triggers.
    tx.exec("ALTER TABLE events DISABLE TRIGGER waggle_roster_fence, "
            "DISABLE TRIGGER waggle_roster_fence_at_commit");
    auto res = db::write_events(tx, {ingest_item{c, ptr(capped)}});
    tx.exec("ALTER TABLE events ENABLE TRIGGER waggle_roster_fence, "
            "ENABLE TRIGGER waggle_roster_fence_at_commit");
    tx.commit();
    ASSERT_EQ(res.at(0).outcome, write_outcome::stored) << res.at(0).reason;
  }
  ASSERT_EQ(live_heads(c, "crowd", 39002), 1);
  ASSERT_EQ(live_head_raw(c, "crowd", 39002), capped.raw);
  EXPECT_FALSE(is_live(c, stored->id));
  EXPECT_EQ(stale_channels(c), std::vector<std::string>{"crowd"});

  // The start-up repair: publish again.
  auto repair = publish(c, "crowd", now);
  ASSERT_EQ(repair.events.size(), 3u);
  const auto* fixed = find_kind(repair.events, 39002);
  ASSERT_NE(fixed, nullptr);
  EXPECT_EQ(fixed->created_at, capped.created_at + 1);
  auto head = proto::parse_event(live_head_raw(c, "crowd", 39002));
  ASSERT_TRUE(head.has_value());
  EXPECT_EQ(head->id, fixed->id);
  EXPECT_EQ(p_tag_count(*head), 1501u);
  EXPECT_EQ(live_heads(c, "crowd", 39002), 1);
  EXPECT_TRUE(stale_channels(c).empty());
}

// ---- 12. read_channel_access ------------------------------------------------------------

TEST_F(GroupStoreTest, ReadChannelAccessReportsStateAndWhichPubkeysAreMembers) {
  auto c = community();
  make_channel(c, "open-room");
  make_channel(c, "closed-room", {{"private"}});
  make_channel(c, "old-room", {{"ttl", "60"}});
  make_channel(c, "gone-room");
  ASSERT_EQ(run(c, owner, nip29::kind_put_user, "closed-room", {{"p", pk(other)}}).result.outcome,
            write_outcome::stored);
  ASSERT_EQ(run(c, owner, nip29::kind_remove_user, "closed-room", {{"p", pk(other)}}).result.outcome,
            write_outcome::stored);
  ASSERT_EQ(run(c, owner, nip29::kind_delete_group, "gone-room").result.outcome, write_outcome::stored);
  sql("UPDATE channels SET archived_at = now() WHERE community_id = " + std::to_string(c) +
      " AND id = 'old-room'");
  // The same channel id in another community, where `other` is a member.
  auto c2 = community("other");
  make_channel(c2, "closed-room", {{"private"}});
  ASSERT_EQ(run(c2, owner, nip29::kind_put_user, "closed-room", {{"p", pk(other)}}).result.outcome,
            write_outcome::stored);

  auto got = db::read_channel_access(conn(), c,
                                     {"open-room", "closed-room", "old-room", "gone-room", "nowhere"},
                                     {pk(member), pk(other), "not-hex"});
  std::map<std::string, db::channel_access> by;
  for (auto& a : got)
    by[a.channel] = a;
  ASSERT_EQ(by.size(), 5u);

  EXPECT_TRUE(by["open-room"].view.exists);
  EXPECT_TRUE(by["open-room"].view.open);
  EXPECT_FALSE(by["open-room"].view.deleted);
  EXPECT_FALSE(by["open-room"].view.archived);
  EXPECT_EQ(by["open-room"].members, std::vector<std::string>{pk(member)});

  EXPECT_TRUE(by["closed-room"].view.exists);
  EXPECT_FALSE(by["closed-room"].view.open);
  EXPECT_EQ(by["closed-room"].members, std::vector<std::string>{pk(member)})
    << "a removed member is not a member; another community's membership does not count";

  EXPECT_TRUE(by["old-room"].view.exists);
  EXPECT_TRUE(by["old-room"].view.archived);
  EXPECT_FALSE(by["old-room"].view.deleted);

  EXPECT_TRUE(by["gone-room"].view.exists);
  EXPECT_TRUE(by["gone-room"].view.deleted);

  EXPECT_FALSE(by["nowhere"].view.exists);
  EXPECT_TRUE(by["nowhere"].members.empty());

  // What the reader does with them.
  EXPECT_TRUE(nip29::may_read(by["open-room"].view, 0).ok());
  EXPECT_TRUE(nip29::may_read(by["closed-room"].view, by["closed-room"].members.size()).ok());
  EXPECT_TRUE(nip29::may_read(by["old-room"].view, 0).ok());
  EXPECT_FALSE(nip29::may_read(by["gone-room"].view, 1).ok());
  EXPECT_FALSE(nip29::may_read(by["nowhere"].view, 0).ok());

  // A private channel for someone who is not a member.
  auto outsider_view = db::read_channel_access(conn(), c, {"closed-room"}, {pk(outsider)});
  ASSERT_EQ(outsider_view.size(), 1u);
  EXPECT_TRUE(outsider_view[0].members.empty());
  EXPECT_FALSE(nip29::may_read(outsider_view[0].view, outsider_view[0].members.size()).ok());

  // Several of a connection's pubkeys can be members.
  auto both = db::read_channel_access(conn(), c, {"open-room"}, {pk(owner), pk(admin), pk(outsider)});
  ASSERT_EQ(both.size(), 1u);
  auto ms = both[0].members;
  std::sort(ms.begin(), ms.end());
  auto want = std::vector<std::string>{pk(owner), pk(admin)};
  std::sort(want.begin(), want.end());
  EXPECT_EQ(ms, want);

  // No pubkeys at all.
  auto anon = db::read_channel_access(conn(), c, {"open-room"}, {});
  ASSERT_EQ(anon.size(), 1u);
  EXPECT_TRUE(anon[0].view.exists);
  EXPECT_TRUE(anon[0].members.empty());
}

// ---- 13. archive_expired_channels -------------------------------------------------------

TEST_F(GroupStoreTest, ReaperArchivesExpiredEphemeralChannelsAndSkipsLockedOnes) {
  auto c = community();
  for (const char* ch : {"due", "locked", "future"})
    ASSERT_EQ(run(c, owner, nip29::kind_create_group, ch, {{"ttl", "60"}}).result.outcome,
              write_outcome::stored);
  ASSERT_EQ(run(c, owner, nip29::kind_create_group, "permanent").result.outcome, write_outcome::stored);
  const auto cs = std::to_string(c);
  sql("UPDATE channels SET ttl_deadline = now() - interval '1 second' WHERE community_id = " + cs +
      " AND id IN ('due', 'locked')");
  sql("UPDATE channels SET ttl_deadline = now() + interval '1 hour' WHERE community_id = " + cs +
      " AND id = 'future'");
  // A stray deadline on a permanent channel does not make it ephemeral.
  sql("UPDATE channels SET ttl_deadline = now() - interval '1 hour' WHERE community_id = " + cs +
      " AND id = 'permanent'");

  auto mine = [&](const std::vector<channel_ref>& refs) {
    std::vector<std::string> out;
    for (const auto& r : refs)
      if (r.community_id == c)
        out.push_back(r.channel);
    std::sort(out.begin(), out.end());
    return out;
  };

  // A commit refreshing "locked" holds its channel_ttl key SHARED right now.
  auto holder_conn = connect();
  std::vector<channel_ref> first;
  {
    pqxx::work holder(*holder_conn);
    holder.exec_params("SELECT pg_advisory_xact_lock_shared(hashtextextended($1, 0))",
                       db::channel_ttl_lock_key(c, "locked"));
    first = db::archive_expired_channels(conn(), 10000);
    EXPECT_FALSE(channel_row(c, "locked")->archived) << "skipped while its key is held";
    holder.commit();
  }
  EXPECT_EQ(mine(first), std::vector<std::string>{"due"});
  EXPECT_TRUE(channel_row(c, "due")->archived);
  EXPECT_FALSE(channel_row(c, "future")->archived);
  EXPECT_FALSE(channel_row(c, "permanent")->archived);

  // The next round, with the transaction over, archives it.
  auto second = db::archive_expired_channels(conn(), 10000);
  EXPECT_EQ(mine(second), std::vector<std::string>{"locked"});
  EXPECT_TRUE(channel_row(c, "locked")->archived);
  EXPECT_TRUE(mine(db::archive_expired_channels(conn(), 10000)).empty());
  EXPECT_FALSE(channel_row(c, "future")->archived);
  EXPECT_FALSE(channel_row(c, "permanent")->archived);
  EXPECT_FALSE(channel_row(c, "due")->deleted);

  // An archived channel takes no posts and no joins.
  auto r = post(c, post_event(owner, "due"));
  EXPECT_EQ(r.outcome, write_outcome::refused);
  EXPECT_TRUE(contains(r.reason, "archived")) << r.reason;
  EXPECT_EQ(run(c, outsider, nip29::kind_join_request, "due").result.outcome, write_outcome::refused);
}

}  // namespace
}  // namespace waggle::pgtest
