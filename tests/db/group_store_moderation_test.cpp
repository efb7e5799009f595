// NIP-29 channels in the database (db/group_store.hpp), what moderators and members
// do to a channel's content: edit (9002: metadata, visibility, TTL), delete event
// (9005), delete group (9008), commands re-sent (duplicates), and posts through
// db::write_batch (who may post where). Fixture: group_store_fixture.hpp.

#include <optional>
#include <string>
#include <vector>

#include "tests/db/group_store_fixture.hpp"

namespace waggle::pgtest {
namespace {

// ---- 5. 9002 edit -----------------------------------------------------------------------

TEST_F(GroupStoreTest, EditMetadataVisibilityAndTtl) {
  auto c = community();
  make_channel(c, "room");

  auto out = run(c, admin, nip29::kind_edit_metadata, "room",
                 {{"name", "Room"}, {"about", "talk here"}, {"picture", "https://x.test/p.png"}});
  ASSERT_EQ(out.result.outcome, write_outcome::stored) << out.result.reason;
  EXPECT_TRUE(out.change.metadata_changed);
  EXPECT_FALSE(out.change.roster_changed);
  EXPECT_FALSE(out.change.became_private);
  auto ch = *channel_row(c, "room");
  EXPECT_EQ(ch.name, "Room");
  EXPECT_EQ(ch.about, "talk here");
  EXPECT_EQ(ch.picture, "https://x.test/p.png");
  EXPECT_EQ(ch.visibility, "open");

  // Fields the command does not name stay.
  ASSERT_EQ(run(c, owner, nip29::kind_edit_metadata, "room", {{"name", "Room 2"}}).result.outcome,
            write_outcome::stored);
  ch = *channel_row(c, "room");
  EXPECT_EQ(ch.name, "Room 2");
  EXPECT_EQ(ch.about, "talk here");
  EXPECT_EQ(ch.picture, "https://x.test/p.png");

  // open -> private.
  auto priv = run(c, owner, nip29::kind_edit_metadata, "room", {{"private"}});
  ASSERT_EQ(priv.result.outcome, write_outcome::stored) << priv.result.reason;
  EXPECT_TRUE(priv.change.became_private);
  EXPECT_EQ(channel_row(c, "room")->visibility, "private");
  // private -> private is not "became private".
  auto still = run(c, owner, nip29::kind_edit_metadata, "room", {{"private"}});
  EXPECT_EQ(still.result.outcome, write_outcome::stored);
  EXPECT_FALSE(still.change.became_private);
  // private -> open.
  auto pub = run(c, owner, nip29::kind_edit_metadata, "room", {{"public"}});
  EXPECT_EQ(pub.result.outcome, write_outcome::stored);
  EXPECT_FALSE(pub.change.became_private);
  EXPECT_EQ(channel_row(c, "room")->visibility, "open");

  // TTL: permanent -> ephemeral sets ttl_seconds and the deadline.
  auto ttl = run(c, admin, nip29::kind_edit_metadata, "room", {{"ttl", "120"}});
  ASSERT_EQ(ttl.result.outcome, write_outcome::stored) << ttl.result.reason;
  ch = *channel_row(c, "room");
  EXPECT_EQ(ch.ttl_seconds, std::optional<int32_t>(120));
  ASSERT_TRUE(ch.deadline_in);
  EXPECT_GT(*ch.deadline_in, 110.0);
  EXPECT_LE(*ch.deadline_in, 120.5);
  // A shorter TTL moves the deadline to the new TTL (not the old one).
  ASSERT_EQ(run(c, admin, nip29::kind_edit_metadata, "room", {{"ttl", "30"}}).result.outcome,
            write_outcome::stored);
  ch = *channel_row(c, "room");
  EXPECT_EQ(ch.ttl_seconds, std::optional<int32_t>(30));
  ASSERT_TRUE(ch.deadline_in);
  EXPECT_GT(*ch.deadline_in, 20.0);
  EXPECT_LE(*ch.deadline_in, 30.5);
  // "0" makes it permanent again.
  ASSERT_EQ(run(c, admin, nip29::kind_edit_metadata, "room", {{"ttl", "0"}}).result.outcome,
            write_outcome::stored);
  ch = *channel_row(c, "room");
  EXPECT_FALSE(ch.ttl_seconds);
  EXPECT_FALSE(ch.deadline_in);

  // Non-moderators are refused and change nothing.
  for (int who : {member, outsider}) {
    auto ev = command_event(who, nip29::kind_edit_metadata, "room", {{"name", "hijacked"}, {"ttl", "5"}});
    auto refused = run(c, ev);
    EXPECT_EQ(refused.result.outcome, write_outcome::refused) << who;
    EXPECT_FALSE(refused.change.any());
    EXPECT_FALSE(exists(c, ev.id));
  }
  ch = *channel_row(c, "room");
  EXPECT_EQ(ch.name, "Room 2");
  EXPECT_FALSE(ch.ttl_seconds);

  // Bad values are invalid.
  EXPECT_EQ(run(c, owner, nip29::kind_edit_metadata, "room", {{"ttl", "-5"}}).result.outcome,
            write_outcome::rejected);
  EXPECT_EQ(run(c, owner, nip29::kind_edit_metadata, "room", {{"name", std::string(129, 'n')}}).result.outcome,
            write_outcome::rejected);
}

// ---- 6. 9005 delete event ---------------------------------------------------------------

TEST_F(GroupStoreTest, DeleteEventReachesOnlyEventsOfThatChannel) {
  auto c = community();
  make_channel(c, "a");
  make_channel(c, "b");
  auto in_a = post_event(member, "a", "in a");
  auto in_a2 = post_event(member, "a", "in a too");
  auto in_b = post_event(member, "b", "in b");
  auto global = make_event(member, 1, next_ts(), {}, "global");
  ASSERT_EQ(post(c, in_a).outcome, write_outcome::stored);
  ASSERT_EQ(post(c, in_a2).outcome, write_outcome::stored);
  ASSERT_EQ(post(c, in_b).outcome, write_outcome::stored);
  ASSERT_EQ(post(c, global).outcome, write_outcome::stored);
  // The same event (same id) in another community, in its own channel "a".
  auto c2 = community("other");
  make_channel(c2, "a");
  ASSERT_EQ(post(c2, in_a).outcome, write_outcome::stored);

  // A member cannot delete.
  EXPECT_EQ(run(c, member, nip29::kind_delete_event, "a", {{"e", in_a2.id}}).result.outcome,
            write_outcome::refused);
  EXPECT_TRUE(is_live(c, in_a2.id));

  auto del = command_event(admin, nip29::kind_delete_event, "a",
                           {{"e", in_a.id}, {"e", in_b.id}, {"e", global.id}});
  auto out = run(c, del);
  ASSERT_EQ(out.result.outcome, write_outcome::stored) << out.result.reason;
  EXPECT_FALSE(out.change.roster_changed);
  EXPECT_FALSE(is_live(c, in_a.id));
  EXPECT_TRUE(is_live(c, in_a2.id));
  EXPECT_TRUE(is_live(c, in_b.id)) << "an event of another channel is beyond this moderator's reach";
  EXPECT_TRUE(is_live(c, global.id)) << "a community-wide event is beyond a channel moderator's reach";
  EXPECT_TRUE(is_live(c2, in_a.id)) << "another community's copy is untouched";
  EXPECT_TRUE(is_live(c, del.id));
  EXPECT_EQ(event_channel(c, del.id), std::optional<std::string>("a"));
  pqxx::nontransaction tx(conn());
  EXPECT_TRUE(tx.exec_params("SELECT deleted_at IS NOT NULL FROM events WHERE community_id = $1 "
                             "AND id = decode($2, 'hex')",
                             c, in_a.id)[0][0]
                .as<bool>());
}

// ---- 7. 9008 delete group ---------------------------------------------------------------

TEST_F(GroupStoreTest, DeleteGroupByOwnerOnlyAndEverythingStops) {
  auto c = community();
  make_channel(c, "doomed");
  const int64_t now = next_ts();
  ASSERT_EQ(publish(c, "doomed", now).events.size(), 3u);
  ASSERT_EQ(run(c, owner, nip29::kind_edit_metadata, "doomed", {{"name", "v2"}}).result.outcome,
            write_outcome::stored);
  ASSERT_EQ(publish(c, "doomed", now).events.size(), 3u);  // older versions exist too

  for (int who : {admin, member, outsider}) {
    auto out = run(c, who, nip29::kind_delete_group, "doomed");
    EXPECT_EQ(out.result.outcome, write_outcome::refused) << who;
    EXPECT_TRUE(contains(out.result.reason, "only an owner")) << out.result.reason;
  }
  EXPECT_FALSE(channel_row(c, "doomed")->deleted);

  auto out = run(c, owner, nip29::kind_delete_group, "doomed");
  ASSERT_EQ(out.result.outcome, write_outcome::stored) << out.result.reason;
  EXPECT_TRUE(out.change.deleted);
  EXPECT_TRUE(out.change.any());
  EXPECT_TRUE(channel_row(c, "doomed")->deleted);
  for (int32_t kind : {39000, 39001, 39002})
    EXPECT_EQ(live_heads(c, "doomed", kind), 0) << kind;

  // Posts and commands are refused from now on.
  auto p = post(c, post_event(member, "doomed"));
  EXPECT_EQ(p.outcome, write_outcome::refused);
  EXPECT_TRUE(contains(p.reason, "deleted")) << p.reason;
  EXPECT_EQ(run(c, owner, nip29::kind_put_user, "doomed", {{"p", pk(other)}}).result.outcome,
            write_outcome::refused);
  EXPECT_EQ(run(c, outsider, nip29::kind_join_request, "doomed").result.outcome, write_outcome::refused);
  EXPECT_EQ(run(c, owner, nip29::kind_edit_metadata, "doomed", {{"name", "v3"}}).result.outcome,
            write_outcome::refused);
  EXPECT_EQ(run(c, owner, nip29::kind_delete_group, "doomed").result.outcome, write_outcome::refused);
  EXPECT_EQ(channel_row(c, "doomed")->name, "v2");

  // Nothing is published for a deleted channel.
  auto pub = publish(c, "doomed", now + 100);
  EXPECT_TRUE(pub.events.empty());
  for (int32_t kind : {39000, 39001, 39002})
    EXPECT_EQ(live_heads(c, "doomed", kind), 0) << kind;
}

// ---- 8. duplicates ----------------------------------------------------------------------

TEST_F(GroupStoreTest, DuplicateCommandChangesNothingTheSecondTime) {
  auto c = community();
  auto create = command_event(owner, nip29::kind_create_group, "room");
  ASSERT_EQ(run(c, create).result.outcome, write_outcome::stored);
  ASSERT_EQ(run(c, owner, nip29::kind_put_user, "room", {{"p", pk(admin), "admin"}}).result.outcome,
            write_outcome::stored);

  auto add = command_event(admin, nip29::kind_put_user, "room", {{"p", pk(member), "member"}});
  auto remove = command_event(admin, nip29::kind_remove_user, "room", {{"p", pk(member)}});
  ASSERT_EQ(run(c, add).result.outcome, write_outcome::stored);
  ASSERT_EQ(run(c, remove).result.outcome, write_outcome::stored);
  ASSERT_EQ(role_of(c, "room", pk(member)), "");
  auto readd = run(c, admin, nip29::kind_put_user, "room", {{"p", pk(member), "guest"}});
  ASSERT_EQ(readd.result.outcome, write_outcome::stored);
  const auto before = *member_row(c, "room", pk(member));

  // The old removal, re-sent, must not remove again.
  auto again = run(c, remove);
  EXPECT_EQ(again.result.outcome, write_outcome::duplicate) << again.result.reason;
  EXPECT_FALSE(again.change.any());
  EXPECT_TRUE(again.change.removed.empty());
  auto after = *member_row(c, "room", pk(member));
  EXPECT_FALSE(after.removed);
  EXPECT_EQ(after.role, "guest");
  EXPECT_EQ(after.added_at, before.added_at);

  // The old add, re-sent, must not reset the role.
  auto add_again = run(c, add);
  EXPECT_EQ(add_again.result.outcome, write_outcome::duplicate) << add_again.result.reason;
  EXPECT_FALSE(add_again.change.any());
  EXPECT_EQ(role_of(c, "room", pk(member)), "guest");

  // An old edit does not overwrite a newer one.
  auto edit_a = command_event(owner, nip29::kind_edit_metadata, "room", {{"name", "A"}});
  ASSERT_EQ(run(c, edit_a).result.outcome, write_outcome::stored);
  ASSERT_EQ(run(c, owner, nip29::kind_edit_metadata, "room", {{"name", "B"}}).result.outcome,
            write_outcome::stored);
  auto edit_again = run(c, edit_a);
  EXPECT_EQ(edit_again.result.outcome, write_outcome::duplicate) << edit_again.result.reason;
  EXPECT_FALSE(edit_again.change.any());
  EXPECT_EQ(channel_row(c, "room")->name, "B");

  // A join re-sent after leaving does not re-join.
  auto join = command_event(outsider, nip29::kind_join_request, "room");
  ASSERT_EQ(run(c, join).result.outcome, write_outcome::stored);
  ASSERT_EQ(run(c, outsider, nip29::kind_leave_request, "room").result.outcome, write_outcome::stored);
  auto join_again = run(c, join);
  EXPECT_EQ(join_again.result.outcome, write_outcome::duplicate) << join_again.result.reason;
  EXPECT_EQ(role_of(c, "room", pk(outsider)), "");

  // The creation re-sent (a client retrying after a lost OK) is a duplicate
  // too, not "group already exists".
  auto create_again = run(c, create);
  EXPECT_EQ(create_again.result.outcome, write_outcome::duplicate) << create_again.result.reason;
  EXPECT_FALSE(create_again.change.any());
  EXPECT_EQ(active_members(c, "room"), 3);

  // A command whose author has since lost the right to send it: still the
  // same, already-applied event, so `duplicate`, and nothing changes.
  auto admin_adds = command_event(admin, nip29::kind_put_user, "room", {{"p", pk(other)}});
  ASSERT_EQ(run(c, admin_adds).result.outcome, write_outcome::stored);
  ASSERT_EQ(run(c, owner, nip29::kind_remove_user, "room", {{"p", pk(other)}}).result.outcome,
            write_outcome::stored);
  ASSERT_EQ(run(c, owner, nip29::kind_put_user, "room", {{"p", pk(admin), "member"}}).result.outcome,
            write_outcome::stored);
  auto stale = run(c, admin_adds);
  EXPECT_EQ(stale.result.outcome, write_outcome::duplicate) << stale.result.reason;
  EXPECT_EQ(role_of(c, "room", pk(other)), "");

  pqxx::nontransaction tx(conn());
  EXPECT_EQ(tx.exec_params("SELECT count(*) FROM events WHERE community_id = $1 AND id = ANY($2::bytea[])",
                           c, "{\"\\\\x" + remove.id + "\",\"\\\\x" + add.id + "\"}")[0][0]
              .as<int>(),
            2);
}

// ---- 9. posts ---------------------------------------------------------------------------

// Two versions of one addressable coordinate in one batch: the older one
// loses to the newer before the newer's membership check. When that check
// refuses the newer one, nothing newer is stored, so the older one must not
// be answered "duplicate: a newer version ..." (OK true): that would be a
// false OK. It is answered failed, and a resend is judged on its own.
TEST_F(GroupStoreTest, AVersionThatLostToARefusedVersionOfTheSameBatchIsNotAnsweredOk) {
  auto c = community();
  make_channel(c, "open-room");
  auto t = next_ts();
  auto older = make_event(outsider, 30023, t, {{"d", "note"}, {"h", "open-room"}}, "v1");
  auto newer = make_event(outsider, 30023, t + 1, {{"d", "note"}, {"h", "open-room"}}, "v2");
  auto r = write(c, {older, newer});
  EXPECT_EQ(r[1].outcome, write_outcome::refused) << r[1].reason;
  EXPECT_EQ(r[0].outcome, write_outcome::failed) << r[0].reason;
  EXPECT_FALSE(exists(c, older.id));
  EXPECT_FALSE(exists(c, newer.id));
  // A member's two versions: the newer is stored and the older truly superseded.
  auto m_older = make_event(member, 30023, t, {{"d", "note"}, {"h", "open-room"}}, "v1");
  auto m_newer = make_event(member, 30023, t + 1, {{"d", "note"}, {"h", "open-room"}}, "v2");
  r = write(c, {m_older, m_newer});
  EXPECT_EQ(r[0].outcome, write_outcome::superseded);
  EXPECT_EQ(r[1].outcome, write_outcome::stored);
}

TEST_F(GroupStoreTest, PostsNeedAnActiveMembershipOfALiveChannel) {
  auto c = community();
  make_channel(c, "open-room");
  make_channel(c, "closed-room", {{"private"}});

  auto mine = post_event(member, "open-room");
  EXPECT_EQ(post(c, mine).outcome, write_outcome::stored);
  EXPECT_EQ(event_channel(c, mine.id), std::optional<std::string>("open-room"));
  EXPECT_EQ(post(c, post_event(owner, "closed-room")).outcome, write_outcome::stored);

  auto stranger = post_event(outsider, "open-room");
  auto r = post(c, stranger);
  EXPECT_EQ(r.outcome, write_outcome::refused);
  EXPECT_TRUE(contains(r.reason, "9021")) << r.reason;
  EXPECT_FALSE(exists(c, stranger.id));

  r = post(c, post_event(outsider, "closed-room"));
  EXPECT_EQ(r.outcome, write_outcome::refused);
  EXPECT_TRUE(contains(r.reason, "private")) << r.reason;
  EXPECT_FALSE(contains(r.reason, "9021")) << r.reason;

  r = post(c, post_event(member, "no-such-room"));
  EXPECT_EQ(r.outcome, write_outcome::refused);
  EXPECT_TRUE(contains(r.reason, "no such channel")) << r.reason;

  // A removed member is refused.
  ASSERT_EQ(run(c, owner, nip29::kind_remove_user, "open-room", {{"p", pk(member)}}).result.outcome,
            write_outcome::stored);
  EXPECT_EQ(post(c, post_event(member, "open-room")).outcome, write_outcome::refused);

  // Archived channels take no posts.
  sql("UPDATE channels SET archived_at = now() WHERE community_id = " + std::to_string(c) +
      " AND id = 'closed-room'");
  r = post(c, post_event(owner, "closed-room"));
  EXPECT_EQ(r.outcome, write_outcome::refused);
  EXPECT_TRUE(contains(r.reason, "archived")) << r.reason;

  // Two h tags: invalid.
  auto two = make_event(owner, 9, next_ts(), {{"h", "open-room"}, {"h", "closed-room"}}, "both");
  r = post(c, two);
  EXPECT_EQ(r.outcome, write_outcome::rejected);
  EXPECT_FALSE(exists(c, two.id));

  // Commands never pass through the plain write path, whoever signs them.
  for (int32_t kind : {nip29::kind_put_user, nip29::kind_create_group, nip29::kind_join_request,
                       nip29::kind_delete_group}) {
    std::vector<proto::tag> tags{{"h", kind == nip29::kind_create_group ? "fresh" : "open-room"}};
    if (kind == nip29::kind_put_user)
      tags.push_back({"p", pk(outsider), "owner"});
    auto cmd = make_event(owner, kind, next_ts(), tags);
    r = post(c, cmd);
    EXPECT_EQ(r.outcome, write_outcome::refused) << kind;
    EXPECT_FALSE(exists(c, cmd.id)) << kind;
  }
  EXPECT_FALSE(channel_row(c, "fresh"));
  EXPECT_EQ(role_of(c, "open-room", pk(outsider)), "");
  EXPECT_FALSE(channel_row(c, "open-room")->deleted);

  // In a mixed batch only the bad ones are refused.
  auto ok = post_event(owner, "open-room");
  auto bad = post_event(outsider, "open-room");
  auto res = write(c, {ok, bad});
  EXPECT_EQ(res[0].outcome, write_outcome::stored);
  EXPECT_EQ(res[1].outcome, write_outcome::refused);
}

}  // namespace
}  // namespace waggle::pgtest
