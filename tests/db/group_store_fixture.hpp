#pragma once

// The fixture of the NIP-29 channel store tests (tests/db/group_store_*_test.cpp,
// db/group_store.hpp): the test signers, signed commands run through
// db::apply_group_command, posts through db::write_batch, the relay-signed roster
// through db::publish_roster, and readers of the rows they write. The rules
// themselves are unit-tested in tests/messages/nip29_rules_test.cpp; these
// tests check that the store applies them to the rows it reads and writes.

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

namespace nip29 = proto::nip29;

// Signers of the tests: 1 owner, 2 admin, 3 member, 4.. outsiders, 99 the relay.
constexpr int owner = 1, admin = 2, member = 3, outsider = 4, other = 5;

inline const std::string& pk(int n) {
  static std::map<int, std::string> cache;
  auto it = cache.find(n);
  if (it == cache.end())
    it = cache.emplace(n, proto::pubkey_of(secret(n))).first;
  return it->second;
}

inline const db::relay_signer& relay() {
  static const db::relay_signer r{secret(99), proto::pubkey_of(secret(99))};
  return r;
}

// A distinct created_at for every event a test makes, so two commands with
// the same tags never share an id by accident.
inline int64_t next_ts() {
  static std::atomic<int64_t> n{std::time(nullptr) - 100000};
  return n++;
}

inline bool contains(const std::string& haystack, const std::string& needle) {
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

inline const proto::event* find_kind(const std::vector<event_ptr>& evs, int32_t kind) {
  for (const auto& e : evs)
    if (e->kind == kind)
      return e.get();
  return nullptr;
}

inline std::string d_of(const proto::event& ev) {
  for (const auto& t : ev.tags)
    if (t.size() >= 2 && t[0] == "d")
      return t[1];
  return "";
}

inline size_t p_tag_count(const proto::event& ev) {
  return static_cast<size_t>(std::count_if(ev.tags.begin(), ev.tags.end(),
                                           [](const proto::tag& t) { return !t.empty() && t[0] == "p"; }));
}

}  // namespace waggle::pgtest
