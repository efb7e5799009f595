// NIP-29 channels in the database (db/group_store.hpp): the commands
// (9000-9022) run through db::apply_group_command with signed events, posts
// through db::write_batch, the relay-signed roster (39000-39002) through
// db::publish_roster, read access and the TTL reaper. The rules themselves
// are unit-tested in tests/messages/nip29_test.cpp; these tests check that the
// store applies them to the rows it reads and writes.

#include <algorithm>
#include <atomic>
#include <ctime>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "db/group_store.hpp"
#include "db/roster_fence.hpp"
#include "messages/proto/nip29.hpp"
#include "tests/db/write_fixture.hpp"

namespace waggle::pgtest {
namespace {

namespace nip29 = proto::nip29;

// Signers of the tests: 1 owner, 2 admin, 3 member, 4.. outsiders, 99 the relay.
constexpr int owner = 1, admin = 2, member = 3, outsider = 4, other = 5;

const std::string& pk(int n) {
  static std::map<int, std::string> cache;
  auto it = cache.find(n);
  if (it == cache.end())
    it = cache.emplace(n, proto::pubkey_of(secret(n))).first;
  return it->second;
}

const db::relay_signer& relay() {
  static const db::relay_signer r{secret(99), proto::pubkey_of(secret(99))};
  return r;
}

// A distinct created_at for every event a test makes, so two commands with
// the same tags never share an id by accident.
int64_t next_ts() {
  static std::atomic<int64_t> n{std::time(nullptr) - 100000};
  return n++;
}

bool contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

struct channel_state {
  std::string name, about, picture, visibility, created_by;
  std::optional<int32_t> ttl_seconds;
  std::optional<double> deadline_in;  // ttl_deadline - clock_timestamp(), seconds
  bool archived = false, deleted = false;
};

struct member_state {
  std::string role, added_by;
  double added_at = 0;  // epoch seconds
  bool removed = false;
  std::string removed_by;  // "" when not removed
};

class GroupStoreTest : public WriteTest {
 protected:
  // A command event by `signer`: ["h", ch] first, then `extra`.
  proto::event command_event(int signer, int32_t kind, const std::string& ch,
                             std::vector<proto::tag> extra = {}) {
    std::vector<proto::tag> tags{{"h", ch}};
    for (auto& t : extra)
      tags.push_back(std::move(t));
    return make_event(signer, kind, next_ts(), std::move(tags));
  }

  db::command_outcome run(int64_t c, const proto::event& ev) {
    return db::apply_group_command(conn(), c, ptr(ev));
  }
  db::command_outcome run(int64_t c, int signer, int32_t kind, const std::string& ch,
                          std::vector<proto::tag> extra = {}) {
    return run(c, command_event(signer, kind, ch, std::move(extra)));
  }

  // A channel created by `owner`, with `admin` as admin and `member` as member.
  void make_channel(int64_t c, const std::string& ch, std::vector<proto::tag> extra = {}) {
    auto created = run(c, owner, nip29::kind_create_group, ch, std::move(extra));
    ASSERT_EQ(created.result.outcome, write_outcome::stored) << created.result.reason;
    auto a = run(c, owner, nip29::kind_put_user, ch, {{"p", pk(admin), "admin"}});
    ASSERT_EQ(a.result.outcome, write_outcome::stored) << a.result.reason;
    auto m = run(c, owner, nip29::kind_put_user, ch, {{"p", pk(member), "member"}});
    ASSERT_EQ(m.result.outcome, write_outcome::stored) << m.result.reason;
  }

  proto::event post_event(int signer, const std::string& ch, const std::string& text = "hi") {
    return make_event(signer, 9, next_ts(), {{"h", ch}}, text);
  }
  write_result post(int64_t c, const proto::event& ev) { return write(c, {ev}).at(0); }

  void sql(const std::string& statement) {
    pqxx::work tx(conn());
    tx.exec(statement);
    tx.commit();
  }

  std::optional<channel_state> channel_row(int64_t c, const std::string& ch) {
    pqxx::nontransaction tx(conn());
    auto r = tx.exec_params(
      "SELECT name, about, picture, visibility, encode(created_by, 'hex'), ttl_seconds, "
      "       extract(epoch FROM ttl_deadline - clock_timestamp())::float8, "
      "       archived_at IS NOT NULL, deleted_at IS NOT NULL "
      "  FROM channels WHERE community_id = $1 AND id = $2",
      c, ch);
    if (r.empty())
      return std::nullopt;
    channel_state s;
    s.name = r[0][0].as<std::string>();
    s.about = r[0][1].as<std::string>();
    s.picture = r[0][2].as<std::string>();
    s.visibility = r[0][3].as<std::string>();
    s.created_by = r[0][4].as<std::string>();
    if (!r[0][5].is_null())
      s.ttl_seconds = r[0][5].as<int32_t>();
    if (!r[0][6].is_null())
      s.deadline_in = r[0][6].as<double>();
    s.archived = r[0][7].as<bool>();
    s.deleted = r[0][8].as<bool>();
    return s;
  }

  std::optional<member_state> member_row(int64_t c, const std::string& ch, const std::string& pubkey) {
    pqxx::nontransaction tx(conn());
    auto r = tx.exec_params(
      "SELECT role, encode(added_by, 'hex'), extract(epoch FROM added_at)::float8, "
      "       removed_at IS NOT NULL, coalesce(encode(removed_by, 'hex'), '') "
      "  FROM channel_members WHERE community_id = $1 AND channel_id = $2 "
      "   AND pubkey = decode($3, 'hex')",
      c, ch, pubkey);
    if (r.empty())
      return std::nullopt;
    member_state m;
    m.role = r[0][0].as<std::string>();
    m.added_by = r[0][1].as<std::string>();
    m.added_at = r[0][2].as<double>();
    m.removed = r[0][3].as<bool>();
    m.removed_by = r[0][4].as<std::string>();
    return m;
  }

  // The active role of `pubkey`, "" when not an active member.
  std::string role_of(int64_t c, const std::string& ch, const std::string& pubkey) {
    auto m = member_row(c, ch, pubkey);
    return m && !m->removed ? m->role : "";
  }

  int64_t active_members(int64_t c, const std::string& ch) {
    pqxx::nontransaction tx(conn());
    return tx.exec_params(
               "SELECT count(*) FROM channel_members WHERE community_id = $1 AND channel_id = $2 "
               "AND removed_at IS NULL",
               c, ch)[0][0]
      .as<int64_t>();
  }

  // events.channel of a stored event; nullopt when the row is missing,
  // "<null>" when the column is NULL.
  std::optional<std::string> event_channel(int64_t c, const std::string& id) {
    pqxx::nontransaction tx(conn());
    auto r = tx.exec_params(
      "SELECT coalesce(channel, '<null>') FROM events WHERE community_id = $1 AND id = decode($2, 'hex')",
      c, id);
    if (r.empty())
      return std::nullopt;
    return r[0][0].as<std::string>();
  }

  // Live relay-signed heads of `kind` for the channel.
  int64_t live_heads(int64_t c, const std::string& ch, int32_t kind) {
    pqxx::nontransaction tx(conn());
    return tx.exec_params(
               "SELECT count(*) FROM events WHERE community_id = $1 AND kind = $2 AND d_tag = $3 "
               "AND pubkey = decode($4, 'hex') AND deleted_at IS NULL",
               c, kind, ch, relay().pubkey)[0][0]
      .as<int64_t>();
  }
  // The raw JSON of the live head of `kind`, "" if none.
  std::string live_head_raw(int64_t c, const std::string& ch, int32_t kind) {
    pqxx::nontransaction tx(conn());
    auto r = tx.exec_params(
      "SELECT raw FROM events WHERE community_id = $1 AND kind = $2 AND d_tag = $3 "
      "AND pubkey = decode($4, 'hex') AND deleted_at IS NULL",
      c, kind, ch, relay().pubkey);
    return r.empty() ? "" : r[0][0].as<std::string>();
  }
  // Every stored version (deleted ones included) of `kind` for the channel.
  std::vector<int64_t> version_times(int64_t c, const std::string& ch, int32_t kind) {
    pqxx::nontransaction tx(conn());
    std::vector<int64_t> out;
    for (const auto& row : tx.exec_params(
           "SELECT created_at FROM events WHERE community_id = $1 AND kind = $2 AND d_tag = $3 "
           "AND pubkey = decode($4, 'hex') ORDER BY created_at",
           c, kind, ch, relay().pubkey))
      out.push_back(row[0].as<int64_t>());
    return out;
  }

  db::roster_publication publish(int64_t c, const std::string& ch, int64_t now) {
    return db::publish_roster(conn(), c, ch, relay(), now);
  }

  std::vector<std::string> stale_channels(int64_t c) {
    std::vector<std::string> out;
    for (const auto& [community_id, channel] : db::stale_rosters(conn(), relay().pubkey))
      if (community_id == c)
        out.push_back(channel);
    return out;
  }
};

const proto::event* find_kind(const std::vector<event_ptr>& evs, int32_t kind) {
  for (const auto& e : evs)
    if (e->kind == kind)
      return e.get();
  return nullptr;
}

std::string d_of(const proto::event& ev) {
  for (const auto& t : ev.tags)
    if (t.size() >= 2 && t[0] == "d")
      return t[1];
  return "";
}

size_t p_tag_count(const proto::event& ev) {
  return static_cast<size_t>(std::count_if(ev.tags.begin(), ev.tags.end(),
                                           [](const proto::tag& t) { return !t.empty() && t[0] == "p"; }));
}

// ---- 1. 9007 create -------------------------------------------------------------------

TEST_F(GroupStoreTest, CreateMakesTheCreatorOwnerAndStoresTheCommandInTheChannel) {
  auto c = community();
  auto create = command_event(owner, nip29::kind_create_group, "general", {{"name", "General"}});
  auto out = run(c, create);
  ASSERT_EQ(out.result.outcome, write_outcome::stored) << out.result.reason;
  EXPECT_EQ(out.change.channel, "general");
  EXPECT_TRUE(out.change.metadata_changed);
  EXPECT_TRUE(out.change.roster_changed);
  EXPECT_FALSE(out.change.deleted);

  auto ch = channel_row(c, "general");
  ASSERT_TRUE(ch);
  EXPECT_EQ(ch->name, "General");
  EXPECT_EQ(ch->visibility, "open");
  EXPECT_EQ(ch->created_by, pk(owner));
  EXPECT_FALSE(ch->ttl_seconds);
  EXPECT_FALSE(ch->deadline_in);
  EXPECT_FALSE(ch->archived);
  EXPECT_FALSE(ch->deleted);

  auto m = member_row(c, "general", pk(owner));
  ASSERT_TRUE(m);
  EXPECT_EQ(m->role, "owner");
  EXPECT_EQ(m->added_by, pk(owner));
  EXPECT_FALSE(m->removed);
  EXPECT_EQ(active_members(c, "general"), 1);

  EXPECT_EQ(event_channel(c, create.id), std::optional<std::string>("general"));
}

TEST_F(GroupStoreTest, CreatePrivateAndEphemeralChannels) {
  auto c = community();
  auto priv = run(c, owner, nip29::kind_create_group, "secret", {{"private"}});
  ASSERT_EQ(priv.result.outcome, write_outcome::stored) << priv.result.reason;
  EXPECT_EQ(channel_row(c, "secret")->visibility, "private");
  EXPECT_FALSE(channel_row(c, "secret")->ttl_seconds);

  auto eph = run(c, owner, nip29::kind_create_group, "standup", {{"ttl", "60"}});
  ASSERT_EQ(eph.result.outcome, write_outcome::stored) << eph.result.reason;
  auto ch = channel_row(c, "standup");
  ASSERT_TRUE(ch);
  EXPECT_EQ(ch->visibility, "open");
  EXPECT_EQ(ch->ttl_seconds, std::optional<int32_t>(60));
  ASSERT_TRUE(ch->deadline_in);
  EXPECT_GT(*ch->deadline_in, 50.0);
  EXPECT_LE(*ch->deadline_in, 60.5);
}

TEST_F(GroupStoreTest, CreatingAnExistingOrDeletedGroupIsRejected) {
  auto c = community();
  ASSERT_EQ(run(c, owner, nip29::kind_create_group, "taken").result.outcome, write_outcome::stored);
  auto again = command_event(other, nip29::kind_create_group, "taken", {{"name", "mine now"}});
  auto out = run(c, again);
  EXPECT_EQ(out.result.outcome, write_outcome::rejected);
  EXPECT_TRUE(contains(out.result.reason, "group already exists")) << out.result.reason;
  EXPECT_FALSE(out.change.any());
  EXPECT_FALSE(exists(c, again.id));
  EXPECT_EQ(channel_row(c, "taken")->name, "");
  EXPECT_EQ(channel_row(c, "taken")->created_by, pk(owner));
  EXPECT_EQ(role_of(c, "taken", pk(other)), "");
  EXPECT_EQ(active_members(c, "taken"), 1);

  // Ids are never reused, not even after the group was deleted.
  ASSERT_EQ(run(c, owner, nip29::kind_create_group, "gone").result.outcome, write_outcome::stored);
  ASSERT_EQ(run(c, owner, nip29::kind_delete_group, "gone").result.outcome, write_outcome::stored);
  auto revive = run(c, other, nip29::kind_create_group, "gone");
  EXPECT_EQ(revive.result.outcome, write_outcome::rejected);
  EXPECT_TRUE(contains(revive.result.reason, "group already exists")) << revive.result.reason;
  EXPECT_TRUE(channel_row(c, "gone")->deleted);
  EXPECT_EQ(role_of(c, "gone", pk(other)), "");

  // The same id in another community is another channel.
  auto c2 = community("other");
  EXPECT_EQ(run(c2, other, nip29::kind_create_group, "taken").result.outcome, write_outcome::stored);
  EXPECT_EQ(role_of(c2, "taken", pk(other)), "owner");
}

TEST_F(GroupStoreTest, CreateWithABadGroupIdIsRejected) {
  auto c = community();
  for (const std::string& bad : std::vector<std::string>{"Upper", "has space", "dot.ted", std::string(65, 'a'), ""}) {
    auto ev = command_event(owner, nip29::kind_create_group, bad);
    auto out = run(c, ev);
    EXPECT_EQ(out.result.outcome, write_outcome::rejected) << "'" << bad << "'";
    EXPECT_FALSE(exists(c, ev.id)) << bad;
  }
  auto no_h = make_event(owner, nip29::kind_create_group, next_ts(), {{"name", "x"}});
  auto out = run(c, no_h);
  EXPECT_EQ(out.result.outcome, write_outcome::rejected);
  EXPECT_TRUE(contains(out.result.reason, "missing h tag")) << out.result.reason;
  {
    pqxx::nontransaction tx(conn());
    EXPECT_EQ(tx.exec_params("SELECT count(*) FROM channels WHERE community_id = $1", c)[0][0].as<int>(), 0);
  }
  EXPECT_EQ(all_rows(c), 0);
}

// ---- 2. 9000 put user -------------------------------------------------------------------

TEST_F(GroupStoreTest, PutUserByOwnerOrAdminOnly) {
  auto c = community();
  ASSERT_EQ(run(c, owner, nip29::kind_create_group, "room").result.outcome, write_outcome::stored);

  auto by_owner = run(c, owner, nip29::kind_put_user, "room", {{"p", pk(admin), "admin"}});
  ASSERT_EQ(by_owner.result.outcome, write_outcome::stored) << by_owner.result.reason;
  EXPECT_TRUE(by_owner.change.roster_changed);
  EXPECT_FALSE(by_owner.change.metadata_changed);
  EXPECT_EQ(role_of(c, "room", pk(admin)), "admin");
  EXPECT_EQ(member_row(c, "room", pk(admin))->added_by, pk(owner));

  // No role (or an empty one) means member.
  auto by_admin = run(c, admin, nip29::kind_put_user, "room", {{"p", pk(member)}});
  ASSERT_EQ(by_admin.result.outcome, write_outcome::stored) << by_admin.result.reason;
  EXPECT_EQ(role_of(c, "room", pk(member)), "member");
  EXPECT_EQ(member_row(c, "room", pk(member))->added_by, pk(admin));

  // A member cannot add anyone.
  auto by_member = command_event(member, nip29::kind_put_user, "room", {{"p", pk(other), "member"}});
  auto refused = run(c, by_member);
  EXPECT_EQ(refused.result.outcome, write_outcome::refused);
  EXPECT_FALSE(refused.change.any());
  EXPECT_EQ(role_of(c, "room", pk(other)), "");
  EXPECT_FALSE(exists(c, by_member.id)) << "a refused command is not stored";

  // Neither can an outsider.
  EXPECT_EQ(run(c, outsider, nip29::kind_put_user, "room", {{"p", pk(outsider), "owner"}}).result.outcome,
            write_outcome::refused);
  EXPECT_EQ(role_of(c, "room", pk(outsider)), "");

  // An admin cannot make an owner or an admin, nor change an owner's role.
  for (const char* role : {"admin", "owner"}) {
    auto out = run(c, admin, nip29::kind_put_user, "room", {{"p", pk(other), role}});
    EXPECT_EQ(out.result.outcome, write_outcome::refused) << role;
    EXPECT_TRUE(contains(out.result.reason, "only an owner")) << out.result.reason;
    EXPECT_EQ(role_of(c, "room", pk(other)), "") << role;
  }
  auto promote = run(c, admin, nip29::kind_put_user, "room", {{"p", pk(member), "admin"}});
  EXPECT_EQ(promote.result.outcome, write_outcome::refused);
  EXPECT_EQ(role_of(c, "room", pk(member)), "member");
  auto demote = run(c, admin, nip29::kind_put_user, "room", {{"p", pk(owner), "member"}});
  EXPECT_EQ(demote.result.outcome, write_outcome::refused);
  EXPECT_EQ(role_of(c, "room", pk(owner)), "owner");

  // An unknown role is invalid.
  EXPECT_EQ(run(c, owner, nip29::kind_put_user, "room", {{"p", pk(other), "king"}}).result.outcome,
            write_outcome::rejected);
  // A channel that does not exist.
  EXPECT_EQ(run(c, owner, nip29::kind_put_user, "nowhere", {{"p", pk(other)}}).result.outcome,
            write_outcome::refused);
}

TEST_F(GroupStoreTest, RoleChangeKeepsAddedAtAndReAddClearsTheRemoval) {
  auto c = community();
  make_channel(c, "room");
  const auto first = *member_row(c, "room", pk(member));
  ASSERT_EQ(first.added_by, pk(owner));

  // A role change keeps added_at and added_by.
  auto to_guest = run(c, admin, nip29::kind_put_user, "room", {{"p", pk(member), "guest"}});
  ASSERT_EQ(to_guest.result.outcome, write_outcome::stored) << to_guest.result.reason;
  EXPECT_TRUE(to_guest.change.roster_changed);
  auto changed = *member_row(c, "room", pk(member));
  EXPECT_EQ(changed.role, "guest");
  EXPECT_EQ(changed.added_at, first.added_at);
  EXPECT_EQ(changed.added_by, pk(owner));

  // Putting the same role again changes nothing.
  auto same = run(c, admin, nip29::kind_put_user, "room", {{"p", pk(member), "guest"}});
  EXPECT_EQ(same.result.outcome, write_outcome::stored);
  EXPECT_FALSE(same.change.roster_changed);

  auto removed = run(c, owner, nip29::kind_remove_user, "room", {{"p", pk(member)}});
  ASSERT_EQ(removed.result.outcome, write_outcome::stored);
  ASSERT_TRUE(member_row(c, "room", pk(member))->removed);

  // Re-adding clears removed_at/removed_by and starts a new membership.
  auto readd = run(c, admin, nip29::kind_put_user, "room", {{"p", pk(member), "member"}});
  ASSERT_EQ(readd.result.outcome, write_outcome::stored) << readd.result.reason;
  EXPECT_TRUE(readd.change.roster_changed);
  EXPECT_TRUE(readd.change.removed.empty());
  auto back = *member_row(c, "room", pk(member));
  EXPECT_FALSE(back.removed);
  EXPECT_EQ(back.removed_by, "");
  EXPECT_EQ(back.role, "member");
  EXPECT_EQ(back.added_by, pk(admin));
  EXPECT_GT(back.added_at, first.added_at);
  pqxx::nontransaction tx(conn());
  EXPECT_TRUE(tx.exec_params("SELECT removed_at IS NULL AND removed_by IS NULL FROM channel_members "
                             "WHERE community_id = $1 AND channel_id = 'room' AND pubkey = decode($2, 'hex')",
                             c, pk(member))[0][0]
                .as<bool>());
}

// ---- 3. 9001 remove ---------------------------------------------------------------------

TEST_F(GroupStoreTest, RemoveIsSoftAndTheLastOwnerStays) {
  auto c = community();
  make_channel(c, "room");

  auto out = run(c, admin, nip29::kind_remove_user, "room", {{"p", pk(member)}});
  ASSERT_EQ(out.result.outcome, write_outcome::stored) << out.result.reason;
  EXPECT_TRUE(out.change.roster_changed);
  EXPECT_EQ(out.change.removed, std::vector<std::string>{pk(member)});
  auto m = member_row(c, "room", pk(member));
  ASSERT_TRUE(m) << "removal is soft: the row stays";
  EXPECT_TRUE(m->removed);
  EXPECT_EQ(m->removed_by, pk(admin));
  EXPECT_EQ(m->role, "member");

  // Removing someone who is not a member is a no-op (stored, nothing changes).
  auto noop = run(c, admin, nip29::kind_remove_user, "room", {{"p", pk(other)}});
  EXPECT_EQ(noop.result.outcome, write_outcome::stored);
  EXPECT_FALSE(noop.change.roster_changed);
  EXPECT_FALSE(member_row(c, "room", pk(other)));

  // An admin cannot remove an owner; a member cannot remove anyone.
  EXPECT_EQ(run(c, admin, nip29::kind_remove_user, "room", {{"p", pk(owner)}}).result.outcome,
            write_outcome::refused);
  ASSERT_EQ(run(c, owner, nip29::kind_put_user, "room", {{"p", pk(other)}}).result.outcome,
            write_outcome::stored);
  EXPECT_EQ(run(c, other, nip29::kind_remove_user, "room", {{"p", pk(admin)}}).result.outcome,
            write_outcome::refused);
  EXPECT_EQ(role_of(c, "room", pk(admin)), "admin");

  // The last owner can neither be removed nor demoted.
  auto self_remove = run(c, owner, nip29::kind_remove_user, "room", {{"p", pk(owner)}});
  EXPECT_EQ(self_remove.result.outcome, write_outcome::refused);
  EXPECT_TRUE(contains(self_remove.result.reason, "last owner cannot be removed")) << self_remove.result.reason;
  auto self_demote = run(c, owner, nip29::kind_put_user, "room", {{"p", pk(owner), "admin"}});
  EXPECT_EQ(self_demote.result.outcome, write_outcome::refused);
  EXPECT_TRUE(contains(self_demote.result.reason, "last owner cannot be demoted")) << self_demote.result.reason;
  EXPECT_EQ(role_of(c, "room", pk(owner)), "owner");

  // With a second owner, the first may go.
  ASSERT_EQ(run(c, owner, nip29::kind_put_user, "room", {{"p", pk(admin), "owner"}}).result.outcome,
            write_outcome::stored);
  EXPECT_EQ(run(c, admin, nip29::kind_remove_user, "room", {{"p", pk(owner)}}).result.outcome,
            write_outcome::stored);
  EXPECT_EQ(role_of(c, "room", pk(owner)), "");
  EXPECT_EQ(member_row(c, "room", pk(owner))->removed_by, pk(admin));
}

// ---- 4. 9021 join / 9022 leave ----------------------------------------------------------

TEST_F(GroupStoreTest, JoinOpenChannelsOnlyAndLeave) {
  auto c = community();
  make_channel(c, "open-room");
  make_channel(c, "closed-room", {{"private"}});

  auto join = run(c, outsider, nip29::kind_join_request, "open-room");
  ASSERT_EQ(join.result.outcome, write_outcome::stored) << join.result.reason;
  EXPECT_TRUE(join.change.roster_changed);
  EXPECT_EQ(role_of(c, "open-room", pk(outsider)), "member");
  EXPECT_EQ(member_row(c, "open-room", pk(outsider))->added_by, pk(outsider));

  // Joining again changes nothing.
  auto again = run(c, outsider, nip29::kind_join_request, "open-room");
  EXPECT_EQ(again.result.outcome, write_outcome::stored);
  EXPECT_FALSE(again.change.roster_changed);

  auto closed = command_event(outsider, nip29::kind_join_request, "closed-room");
  auto refused = run(c, closed);
  EXPECT_EQ(refused.result.outcome, write_outcome::refused);
  EXPECT_TRUE(contains(refused.result.reason, "private")) << refused.result.reason;
  EXPECT_EQ(role_of(c, "closed-room", pk(outsider)), "");
  EXPECT_FALSE(exists(c, closed.id));

  EXPECT_EQ(run(c, outsider, nip29::kind_join_request, "no-such-room").result.outcome,
            write_outcome::refused);

  // Leave.
  auto leave = run(c, outsider, nip29::kind_leave_request, "open-room");
  ASSERT_EQ(leave.result.outcome, write_outcome::stored) << leave.result.reason;
  EXPECT_EQ(leave.change.removed, std::vector<std::string>{pk(outsider)});
  auto m = member_row(c, "open-room", pk(outsider));
  ASSERT_TRUE(m);
  EXPECT_TRUE(m->removed);
  EXPECT_EQ(m->removed_by, pk(outsider));
  // Leaving when not a member is refused.
  EXPECT_EQ(run(c, outsider, nip29::kind_leave_request, "open-room").result.outcome,
            write_outcome::refused);
  // A member of a private channel may leave it.
  EXPECT_EQ(run(c, member, nip29::kind_leave_request, "closed-room").result.outcome,
            write_outcome::stored);
  EXPECT_EQ(role_of(c, "closed-room", pk(member)), "");

  // The last owner cannot leave.
  auto last = run(c, owner, nip29::kind_leave_request, "open-room");
  EXPECT_EQ(last.result.outcome, write_outcome::refused);
  EXPECT_TRUE(contains(last.result.reason, "last owner cannot leave")) << last.result.reason;
  EXPECT_EQ(role_of(c, "open-room", pk(owner)), "owner");
}

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
