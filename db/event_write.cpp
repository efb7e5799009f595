#include "db/event_search.hpp"
#include "db/event_store.hpp"
#include "db/event_write_sql.hpp"
#include "db/indexed_tags.hpp"
#include "db/operator_outbox.hpp"
#include "db/push_store.hpp"
#include "db/sql_util.hpp"

#include <algorithm>
#include <functional>
#include <atomic>
#include <cctype>
#include <charconv>
#include <map>
#include <optional>
#include <set>
#include <stdexcept>
#include <string_view>
#include <tuple>
#include <unordered_map>
#include <unordered_set>

#include <pqxx/except>
#include <pqxx/nontransaction>
#include <pqxx/prepared_statement>
#include <pqxx/result>
#include <pqxx/transaction>

#include "messages/proto/nip29.hpp"
#include "messages/proto/nip40.hpp"
#include "messages/proto/push.hpp"

// The write path for events (docs/write-path.md, docs/lock-protocol.md).
//
// A batch is ONE transaction with a constant number of statements, whatever
// its size (each one skipped when it has nothing to do), in two phases: the
// answers of phase A (S0, S1) decide what phase B (S2..S5) writes, and no
// statement of phase B needs another's answer (so a client with libpq's
// pipeline mode could send each phase in one round trip; see write_batch):
//   S0 lock     pg_advisory_xact_lock on every replacement coordinate the batch
//               touches (candidates and kind-5 `a` targets), in sorted key order,
//               in one statement, before any head is read.
//   S1 check    which candidates already exist (duplicates), the live heads of
//               their coordinates, and whether a stored deletion (kind 5) of
//               their author already covers them.
//   S2 replace  soft-delete the heads that the batch's new versions beat.
//   S3 insert   the events, in (community_id, id) order, ON CONFLICT DO NOTHING
//               RETURNING, with their search vectors (docs/search.md), and
//               (same statement) the event_tags rows of exactly the events
//               inserted.
//   S4 delete   NIP-09: the soft deletions requested by the kind-5 events
//               inserted.
//   S5 ttl      waggle_refresh_channel_ttl (migrations/0002): for the
//               channels of the events stored (except creations, kind 9007),
//               the channel_ttl keys SHARED in sorted order, a plain read of
//               ttl_seconds, and the new deadline of ephemeral channels.
// and, after phase B, once S3 has said which events this batch inserted:
//   S6 outbox   db::enqueue_mentions (db/operator_outbox.cpp): the operator
//               listener rows of those events' mentions and their NOTIFY
//               (docs/delivery.md); skipped when no inserted event mentions.
//   S7 gate     db::gate_push_jobs (db/push_store.hpp): push_gate SHARED for
//               the communities of the inserted push-kind events and their
//               match jobs where a live lease exists (docs/push.md); last,
//               as push_gate is last in the lock order; skipped when no
//               such event is in a gated community.
// Channel posts (an `h` tag, not a NIP-29 command) are checked in S1: the
// channel must exist, be live and not archived, and the author must be an
// active member (proto::nip29::may_post). The check is a plain read in the
// batch's transaction; a removal that commits before it is seen, one that
// commits after it orders after the post.
// NIP-09 beyond the deletion itself: an event arriving AFTER a stored kind-5
// of its author that names it (by `e` id, or by `a` coordinate with
// created_at >= the event's) is answered `superseded` and not stored. For `a`
// this is race-free (the deletion takes the coordinate's replacement lock);
// for `e`, a deletion and its target committed concurrently in two different
// batches can both miss each other and leave the target live (no lock domain
// covers arbitrary ids; documented gap). The tombstone match on `a` values is
// textual ("<kind>:<pubkey>:<d>"), and values over 256 bytes are not indexed.
//
// Every array travels as ONE parameter (a PostgreSQL array literal); strings
// that can carry arbitrary bytes (d tags, tag values, lock keys) travel as hex
// and are converted by the server, so a value PostgreSQL cannot store (a NUL
// character, invalid UTF-8) is a real SQLSTATE 22021 of this event, which the
// bisection isolates, never a silently truncated parameter.

namespace waggle::db {

using namespace sql;
using namespace write_sql;

namespace {

std::atomic<uint64_t> ttl_refresh_failure_count{0};

// The answer to S1's community verdict (docs/communities.md).
write_result community_refusal(const std::string& verdict) {
  if (verdict == "banned")
    return {write_outcome::blocked, "this key is banned from this community"};
  if (verdict == "event")
    return {write_outcome::blocked, "this event is banned from this community"};
  if (verdict == "kind")
    return {write_outcome::blocked, "this community does not accept events of this kind"};
  return {write_outcome::refused, "not a member of this community"};
}

// ---- candidates -----------------------------------------------------------------

struct candidate {
  size_t item = 0;  // index into the batch
  int64_t community_id = 0;
  const proto::event* ev = nullptr;
  bool coordinate = false;  // replaceable or addressable
  std::string d;            // coordinate d ('' for replaceable kinds)
  std::optional<std::string> channel;  // the `h` tag
  bool check_member = false;           // a post: the author must be a member
};

// NIP-01 replaceable order: newer created_at wins; a tie goes to the lowest id.
bool beats(int64_t a_created, std::string_view a_id, int64_t b_created, std::string_view b_id) {
  return a_created > b_created || (a_created == b_created && a_id < b_id);
}

struct coordinate_key {
  int64_t community_id;
  int32_t kind;
  std::string pubkey;
  std::string d;
  bool operator<(const coordinate_key& o) const {
    return std::tie(community_id, kind, pubkey, d) < std::tie(o.community_id, o.kind, o.pubkey, o.d);
  }
};

// The coordinate as written in an `a` tag: "<kind>:<pubkey>:<d>".
std::string a_value_of(int32_t kind, const std::string& pubkey, const std::string& d) {
  return std::to_string(kind) + ":" + pubkey + ":" + d;
}

struct a_target {
  int32_t kind;
  std::string d;
};

// Parses an `a` tag value "<kind>:<pubkey>:<d>" naming a coordinate of
// `author`; anything else (another author, a non-replaceable kind, bad shape)
// names nothing this deletion may touch.
std::optional<a_target> parse_a_target(std::string_view v, std::string_view author) {
  auto c1 = v.find(':');
  if (c1 == std::string_view::npos || c1 == 0 || c1 > 5)
    return std::nullopt;
  int32_t kind = 0;
  for (char c : v.substr(0, c1))
    if (c < '0' || c > '9')
      return std::nullopt;
  auto [p, ec] = std::from_chars(v.data(), v.data() + c1, kind);
  if (ec != std::errc() || p != v.data() + c1)
    return std::nullopt;
  auto rest = v.substr(c1 + 1);
  auto c2 = rest.find(':');
  std::string_view pk = c2 == std::string_view::npos ? rest : rest.substr(0, c2);
  if (pk != author)
    return std::nullopt;
  if (proto::is_replaceable(kind))
    return a_target{kind, ""};
  if (proto::is_addressable(kind))
    return a_target{kind, std::string(c2 == std::string_view::npos ? "" : rest.substr(c2 + 1))};
  return std::nullopt;
}

std::string lock_key_hex(int64_t community_id, int32_t kind, const std::string& pubkey,
                         const std::string& d) {
  return hex_of(replacement_lock_key(community_id, kind, pubkey, d));
}

// Pre-database validation: what can never be stored is answered here.
std::optional<std::string> malformed(const proto::event& ev) {
  if (!is_hex64(ev.id))
    return "malformed event id";
  if (!is_hex64(ev.pubkey))
    return "malformed event pubkey";
  if (ev.raw.empty())
    return "event has no serialised form";
  if (ev.raw.find('\0') != std::string::npos)
    return "event serialisation contains a NUL byte";
  if (auto at = proto::expiration_of(ev); !at)
    return at.error().reason;
  return std::nullopt;
}

}  // namespace

uint64_t ttl_refresh_failures() { return ttl_refresh_failure_count.load(); }

std::string membership_lock_key(int64_t community_id, const std::string& channel) {
  return "waggle_membership:" + std::to_string(community_id) + ":" + channel;
}

std::string channel_ttl_lock_key(int64_t community_id, const std::string& channel) {
  return "waggle_channel_ttl:" + std::to_string(community_id) + ":" + channel;
}

std::string replacement_lock_key(int64_t community_id, int32_t kind, const std::string& pubkey,
                                 const std::string& d_tag) {
  std::string key = "waggle_replace:";
  key += std::to_string(community_id);
  key += ':';
  key += std::to_string(kind);
  key += ':';
  key += pubkey;
  key += ':';
  key += d_tag;
  return key;
}

namespace {

// One statement of a batch: a prepared statement's name and its parameters
// (array literals).
struct statement_call {
  const char* name;
  std::vector<std::string> params;
};

// Runs the statements of one phase, in order, and returns their results.
using phase_runner = std::function<std::vector<pqxx::result>(std::vector<statement_call>&& calls)>;

namespace nip29 = proto::nip29;

// The working state of one batch, carried by write_in_phases from one step to
// the next: the answers of each step are what the next one reads.
struct batch_write {
  batch_write(const std::vector<ingest_item>& items, const write_options& opts)
    : items(items), opts(opts), results(items.size()), alias(items.size()),
      beaten_by_head(items.size(), false) {}

  void collect_candidates();
  void drop_batch_losers();
  void sort_for_insertion();
  void finish_batch_losers();
  void finish_aliases();
  void add_lock_call(std::vector<statement_call>& phase_a) const;
  void add_check_call(std::vector<statement_call>& phase_a) const;
  using inserted_set = std::set<std::pair<int64_t, std::string>>;
  void read_checks(const pqxx::result& answer, inserted_set* inserted = nullptr);
  void decide();
  void add_replace_call(std::vector<statement_call>& phase_b);
  void add_insert_call(std::vector<statement_call>& phase_b);
  void add_delete_and_ttl_calls(std::vector<statement_call>& phase_b);
  void read_writes(const std::vector<pqxx::result>& answers);
  bool all_plain() const;
  statement_call check_insert_call() const;
  void read_check_insert(const pqxx::result& answer);
  void mark_inserted(const inserted_set& inserted);

  const std::vector<ingest_item>& items;
  const write_options& opts;
  std::vector<write_result> results;
  std::vector<std::optional<size_t>> alias;  // repeated id -> first item
  // Versions that lost to another version of their coordinate in this batch
  // (item, coordinate), and each coordinate's winning item: a loser's
  // "superseded" holds only if its winner ends up stored (finish_batch_losers).
  std::vector<std::pair<size_t, coordinate_key>> losers;
  std::map<coordinate_key, size_t> winners;
  std::vector<bool> beaten_by_head;  // by item: superseded by a live stored version
  std::vector<candidate> cands;
  // S1's answers, one entry per candidate.
  std::vector<bool> exists, tombstoned;
  std::vector<std::vector<std::pair<std::string, int64_t>>> heads;
  // Channel posts: the channel's state ("open", "private:archived"...) and
  // the author's active role, if the channel exists.
  std::vector<std::optional<std::pair<std::string, std::optional<std::string>>>> posts;
  // The community's refusal, if any: "banned", "event", "kind" or "member".
  std::vector<std::optional<std::string>> admission;
  // What phase B writes.
  std::vector<size_t> to_insert;  // indexes into cands, still in (community, id) order
  std::vector<std::pair<int64_t, std::string>> replaced_heads;
  // Phase B's answers that are read back, by position among its statements.
  std::optional<size_t> insert_at, ttl_at;
  // S6's input: the events S3 inserted, never a duplicate (whose outbox rows
  // were written, and perhaps delivered and deleted, by its first insert).
  std::vector<mention_source> inserted_events;
};

void batch_write::collect_candidates() {
  std::map<std::pair<int64_t, std::string_view>, size_t> first_of;
  for (size_t i = 0; i < items.size(); ++i) {
    const auto& ev = items[i].ev;
    if (!ev) {
      results[i] = {write_outcome::rejected, "no event"};
      continue;
    }
    if (proto::is_ephemeral(ev->kind)) {
      // The ingest path fans ephemeral events out without storing them;
      // one reaching this function is refused, not stored.
      results[i] = {write_outcome::rejected, "ephemeral events are not stored"};
      continue;
    }
    if (auto why = malformed(*ev)) {
      results[i] = {write_outcome::rejected, *why};
      continue;
    }
    auto channel = nip29::channel_of(*ev);
    if (!channel) {
      results[i] = {write_outcome::rejected, channel.error().reason};
      continue;
    }
    if (ev->kind == proto::push::kind_lease && !opts.accepting_lease) {
      // A lease event is stored only together with its push_leases row.
      results[i] = {write_outcome::rejected, "push leases are accepted one at a time"};
      continue;
    }
    bool command = nip29::is_group_command(ev->kind);
    if (command && !opts.group_commands_authorized) {
      results[i] = {write_outcome::refused, "NIP-29 group commands are not accepted on this path"};
      continue;
    }
    auto [it, fresh] =
      first_of.emplace(std::make_pair(items[i].community_id, std::string_view(ev->id)), i);
    if (!fresh) {
      alias[i] = it->second;
      continue;
    }
    candidate c;
    c.item = i;
    c.community_id = items[i].community_id;
    c.ev = ev.get();
    c.coordinate = proto::is_replaceable(ev->kind) || proto::is_addressable(ev->kind);
    if (proto::is_addressable(ev->kind))
      c.d = proto::d_tag(*ev);
    c.channel = std::move(*channel);
    c.check_member = c.channel.has_value() && !command;
    cands.push_back(std::move(c));
  }
}

// Several versions of one coordinate in the batch: only the winner can be
// stored; the others are superseded without touching the database.
void batch_write::drop_batch_losers() {
  std::map<coordinate_key, size_t> winner;  // -> index into cands
  for (size_t k = 0; k < cands.size(); ++k) {
    const auto& c = cands[k];
    if (!c.coordinate)
      continue;
    coordinate_key key{c.community_id, c.ev->kind, c.ev->pubkey, c.d};
    auto [it, fresh] = winner.emplace(key, k);
    if (fresh)
      continue;
    const auto& w = cands[it->second];
    size_t loser = k;
    if (beats(c.ev->created_at, c.ev->id, w.ev->created_at, w.ev->id)) {
      loser = it->second;
      it->second = k;
    }
    results[cands[loser].item] = {write_outcome::superseded,
                                  "a newer version of this replaceable event is in the same batch"};
    losers.emplace_back(cands[loser].item, key);
    cands[loser].ev = nullptr;  // dropped
  }
  for (auto& [key, k] : winner)
    winners.emplace(key, cands[k].item);
  std::erase_if(cands, [](const candidate& c) { return c.ev == nullptr; });
}

// A loser was answered "superseded" (OK true) on the strength of its winner.
// That holds only when a version newer than the loser is now live: the winner
// was stored, or the winner itself lost to a live stored head (which then
// beats the loser too). Anything else leaves nothing newer live: the winner
// was refused, or it is only a deletion's target (an `e` tombstone names the
// winner's id, not the loser's), or it is a duplicate of a row that may since
// have been deleted. Then the loser fails, and its resend is judged alone:
// never a false OK, at the price of one resend in these rare batches.
void batch_write::finish_batch_losers() {
  for (const auto& [item, key] : losers) {
    auto w = winners.at(key);
    auto won = results[w].outcome;
    if (won == write_outcome::stored || (won == write_outcome::superseded && beaten_by_head[w]))
      continue;
    results[item] = {write_outcome::failed,
                     "the newer version of this event in the same batch was not stored; "
                     "send this one again"};
  }
}

// Insertion order: (community_id, id), so concurrent batches take primary
// key locks in the same order and cannot deadlock on them.
void batch_write::sort_for_insertion() {
  std::sort(cands.begin(), cands.end(), [](const candidate& a, const candidate& b) {
    return std::tie(a.community_id, a.ev->id) < std::tie(b.community_id, b.ev->id);
  });
}

void batch_write::finish_aliases() {
  for (size_t i = 0; i < items.size(); ++i) {
    if (!alias[i])
      continue;
    const auto& first = results[*alias[i]];
    if (first.outcome == write_outcome::stored)
      results[i] = {write_outcome::duplicate, ""};
    else
      results[i] = first;
  }
}

// Phase A. S0: replacement locks, sorted by key hash, one statement.
void batch_write::add_lock_call(std::vector<statement_call>& phase_a) const {
  array_literal keys;
  for (const auto& c : cands) {
    if (c.coordinate)
      keys.text(lock_key_hex(c.community_id, c.ev->kind, c.ev->pubkey, c.d));
    if (c.ev->kind == 5)
      for (const auto& t : c.ev->tags)
        if (t.size() >= 2 && t[0] == "a")
          if (auto a = parse_a_target(t[1], c.ev->pubkey))
            keys.text(lock_key_hex(c.community_id, a->kind, c.ev->pubkey, a->d));
  }
  if (!keys.empty())
    phase_a.push_back({stmt_lock, {keys.str()}});
}

// S1: existing ids, live heads, deletions already stored.
void batch_write::add_check_call(std::vector<statement_call>& phase_a) const {
  array_literal community, id, pubkey, kind, created, d_hex, a_hex, channel;
  for (const auto& c : cands) {
    community.integer(c.community_id);
    id.text(c.ev->id);
    pubkey.text(c.ev->pubkey);
    kind.integer(c.ev->kind);
    created.integer(c.ev->created_at);
    if (c.coordinate) {
      d_hex.text(hex_of(c.d));
      auto a = a_value_of(c.ev->kind, c.ev->pubkey, c.d);
      if (a.size() <= max_indexed_tag_value)
        a_hex.text(hex_of(a));
      else
        a_hex.null();
    } else {
      d_hex.null();
      a_hex.null();
    }
    if (c.check_member)
      channel.text(*c.channel);
    else
      channel.null();
  }
  phase_a.push_back({stmt_check, {community.str(), id.str(), pubkey.str(), kind.str(),
                                  created.str(), d_hex.str(), a_hex.str(), channel.str(),
                                  opts.relay_pubkey}});
}

// S1's rows; with `inserted`, the one-statement write's, whose 'i' rows are
// the ids it inserted.
void batch_write::read_checks(const pqxx::result& answer, inserted_set* inserted) {
  exists.assign(cands.size(), false);
  tombstoned.assign(cands.size(), false);
  heads.assign(cands.size(), {});
  posts.assign(cands.size(), std::nullopt);
  admission.assign(cands.size(), std::nullopt);
  for (const auto& row : answer) {
    auto what = row[1].as<std::string>();
    if (what == "i" && inserted) {
      inserted->emplace(row[3].as<int64_t>(), row[2].as<std::string>());
      continue;
    }
    auto k = row[0].as<size_t>() - 1;
    if (what == "x")
      exists[k] = true;
    else if (what == "t")
      tombstoned[k] = true;
    else if (what == "p")
      admission[k] = row[2].as<std::string>();
    else if (what == "c")
      posts[k].emplace(row[2].as<std::string>(),
                       row[4].is_null() ? std::nullopt
                                        : std::optional<std::string>(row[4].as<std::string>()));
    else
      heads[k].emplace_back(row[2].as<std::string>(), row[3].as<int64_t>());
  }
}

// Decide, per candidate: duplicate, superseded, or insert (and which heads
// the insert replaces).
void batch_write::decide() {
  for (size_t k = 0; k < cands.size(); ++k) {
    const auto& c = cands[k];
    auto& res = results[c.item];
    // Before anything else: a stranger must not learn even whether an id is
    // stored here (a duplicate answer would tell).
    if (admission[k]) {
      res = community_refusal(*admission[k]);
      continue;
    }
    if (exists[k]) {
      // Stored before (live, replaced or deleted): nothing runs again.
      res = {write_outcome::duplicate, ""};
      continue;
    }
    if (tombstoned[k]) {
      res = {write_outcome::superseded, "deleted by its author (NIP-09)"};
      continue;
    }
    if (c.check_member) {
      nip29::channel_view view;
      std::optional<nip29::role> author_role;
      if (posts[k]) {
        const auto& state = posts[k]->first;
        view.exists = true;
        view.open = state.rfind("open", 0) == 0;
        view.deleted = state.ends_with(":deleted");
        view.archived = state.ends_with(":archived");
        if (posts[k]->second)
          author_role = nip29::parse_role(*posts[k]->second);
      }
      if (auto st = nip29::may_post(view, author_role); !st.ok()) {
        res = {write_outcome::refused, st.reason};
        continue;
      }
    }
    bool beaten = false;
    for (const auto& [hid, hcreated] : heads[k])
      if (beats(hcreated, hid, c.ev->created_at, c.ev->id))
        beaten = true;
    if (beaten) {
      res = {write_outcome::superseded, "a newer version of this replaceable event is stored"};
      beaten_by_head[c.item] = true;
      continue;
    }
    for (const auto& [hid, hcreated] : heads[k])
      replaced_heads.emplace_back(c.community_id, hid);
    to_insert.push_back(k);
  }
}

// The per-event values S3 and the one-statement write both send: the JSON,
// the NIP-40 deadline, the search text (docs/search.md) and the indexed tag
// rows.
struct event_rows {
  array_literal raw, expires, search;
  array_literal t_community, t_event, t_name, t_value, t_kind, t_created;

  void add(int64_t community_id, const proto::event& ev) {
    raw.text(ev.raw);
    if (auto text = search_text(ev))
      search.text(*text);
    else
      search.null();
    // NIP-40: collect_candidates refused a malformed expiration already.
    if (auto at = proto::expiration_of(ev); at && *at)
      expires.integer(**at);
    else
      expires.null();
    for (const auto& [name, value] : indexed_tags(ev)) {
      t_community.integer(community_id);
      t_event.text(ev.id);
      t_name.text(name);
      t_value.text(hex_of(value));
      t_kind.integer(ev.kind);
      t_created.integer(ev.created_at);
    }
  }
};

// Phase B. S2: soft-delete the heads the new versions replace (before S3,
// so the one-live-head unique index never sees two).
void batch_write::add_replace_call(std::vector<statement_call>& phase_b) {
  if (replaced_heads.empty())
    return;
  std::sort(replaced_heads.begin(), replaced_heads.end());
  array_literal community, id;
  for (const auto& [cid, hid] : replaced_heads) {
    community.integer(cid);
    id.text(hid);
  }
  phase_b.push_back({stmt_replace, {community.str(), id.str()}});
}

// S3: events and their tag rows, one statement.
void batch_write::add_insert_call(std::vector<statement_call>& phase_b) {
  if (to_insert.empty())
    return;
  array_literal community, id, pubkey, created, kind, d_hex, channel;
  event_rows rows;
  for (size_t k : to_insert) {
    const auto& c = cands[k];
    const auto& ev = *c.ev;
    community.integer(c.community_id);
    id.text(ev.id);
    pubkey.text(ev.pubkey);
    created.integer(ev.created_at);
    kind.integer(ev.kind);
    if (proto::is_addressable(ev.kind))
      d_hex.text(hex_of(c.d));
    else
      d_hex.null();
    if (c.channel)
      channel.text(*c.channel);
    else
      channel.null();
    rows.add(c.community_id, ev);
  }
  insert_at = phase_b.size();
  phase_b.push_back({stmt_insert, {community.str(), id.str(), pubkey.str(), created.str(),
                                   kind.str(), d_hex.str(), rows.raw.str(), rows.t_community.str(),
                                   rows.t_event.str(), rows.t_name.str(), rows.t_value.str(),
                                   rows.t_kind.str(), rows.t_created.str(), channel.str(),
                                   rows.expires.str(), rows.search.str()}});
}

void batch_write::add_delete_and_ttl_calls(std::vector<statement_call>& phase_b) {
  array_literal del_community, del_author, del_target;
  array_literal a_community, a_author, a_kind, a_d, a_until;
  bool any_deletion = false;
  array_literal ttl_community, ttl_channel;
  bool any_channel = false;
  // S4 and S5 are built for every candidate S3 inserts. One that a
  // concurrent batch stored first (S3 skips it) repeats side effects that
  // batch also ran: the same soft deletions (a no-op the second time) and a
  // TTL refresh from now, both harmless.
  for (size_t k : to_insert) {
    const auto& c = cands[k];
    if (c.channel && c.ev->kind != nip29::kind_create_group) {
      ttl_community.integer(c.community_id);
      ttl_channel.text(*c.channel);
      any_channel = true;
    }
    if (c.ev->kind != 5)
      continue;
    for (const auto& t : c.ev->tags) {
      if (t.size() < 2)
        continue;
      if (t[0] == "e" && is_hex64(t[1])) {
        del_community.integer(c.community_id);
        del_author.text(c.ev->pubkey);
        del_target.text(t[1]);
        any_deletion = true;
      } else if (t[0] == "a") {
        if (auto a = parse_a_target(t[1], c.ev->pubkey)) {
          a_community.integer(c.community_id);
          a_author.text(c.ev->pubkey);
          a_kind.integer(a->kind);
          a_d.text(hex_of(a->d));
          a_until.integer(c.ev->created_at);
          any_deletion = true;
        }
      }
    }
  }

  // S4: NIP-09 soft deletions requested by the kind-5 events inserted.
  if (any_deletion)
    phase_b.push_back({stmt_delete, {del_community.str(), del_author.str(), del_target.str(),
                                     a_community.str(), a_author.str(), a_kind.str(), a_d.str(),
                                     a_until.str()}});

  // S5: the TTL refresh, last, so the channel_ttl keys (after replacement and
  // membership in the lock order) are held for the shortest time.
  if (any_channel) {
    ttl_at = phase_b.size();
    phase_b.push_back({stmt_ttl, {ttl_community.str(), ttl_channel.str()}});
  }
}

void batch_write::read_writes(const std::vector<pqxx::result>& answers) {
  std::set<std::pair<int64_t, std::string>> inserted;
  if (insert_at)
    for (const auto& row : answers[*insert_at])
      inserted.emplace(row[0].as<int64_t>(), row[1].as<std::string>());
  mark_inserted(inserted);
  if (ttl_at) {
    const auto& r = answers[*ttl_at];
    if (!r.empty() && !r[0][0].is_null() && r[0][0].as<int>() < 0)
      ttl_refresh_failure_count.fetch_add(1, std::memory_order_relaxed);
  }
}

void batch_write::mark_inserted(const inserted_set& inserted) {
  for (size_t k : to_insert) {
    const auto& c = cands[k];
    auto& res = results[c.item];
    if (inserted.count({c.community_id, c.ev->id})) {
      res = {write_outcome::stored, ""};
      inserted_events.push_back({c.community_id, c.ev});
      continue;
    }
    if (c.coordinate)
      // Under the coordinate lock, S1 saw no row with this id, and any
      // other writer of this id needs the same lock: a conflict here means
      // the protocol is broken, so the whole transaction must not commit
      // (S2 may have replaced a head for it).
      throw std::logic_error("replaceable event vanished under its coordinate lock");
    res = {write_outcome::duplicate, ""};  // a concurrent batch stored it first
  }
}

// A candidate whose whole write is S1 and S3: S1 can only answer 'x', 't' or
// 'p' for it (no head, no channel), decide() inserts it exactly when S1 has
// no row for it, and S2, S4..S7 have nothing to do for it (no coordinate, no
// deletion, no channel, no mention to enqueue, no push kind to gate).
bool batch_write::all_plain() const {
  return std::all_of(cands.begin(), cands.end(), [](const candidate& c) {
    const auto& ev = *c.ev;
    if (c.coordinate || ev.kind == 5 || c.channel || proto::push::is_push_kind(ev.kind))
      return false;
    if (wakes_listeners(ev.kind))
      for (const auto& t : ev.tags)
        if (t.size() >= 2 && t[0] == "p")
          return false;
    return true;
  });
}

// The one-statement write (write_sql::sql_check_insert): S1's parameters,
// then raw and expires_at per candidate, then S3's tag rows.
statement_call batch_write::check_insert_call() const {
  std::vector<statement_call> check;
  add_check_call(check);
  auto call = std::move(check.back());
  call.name = stmt_check_insert;
  event_rows rows;
  for (const auto& c : cands)
    rows.add(c.community_id, *c.ev);
  for (auto* a : {&rows.raw, &rows.expires, &rows.t_community, &rows.t_event, &rows.t_name,
                  &rows.t_value, &rows.t_kind, &rows.t_created, &rows.search})
    call.params.push_back(a->str());
  return call;
}

// The statement's rows: S1's (read and decided as in the phases) and the
// ids it inserted ('i').
void batch_write::read_check_insert(const pqxx::result& answer) {
  inserted_set inserted;
  read_checks(answer, &inserted);
  // Heads and channel rows are impossible for plain candidates; the
  // statement inserted regardless of them, so decide() must never see one.
  for (size_t k = 0; k < cands.size(); ++k)
    if (!heads[k].empty() || posts[k])
      throw std::logic_error("one-statement write: a check row only the phases can answer");
  decide();
  // decide() wants exactly the candidates the statement chose (those with
  // no check row); a stored event it refused would be a broken invariant.
  std::set<std::pair<int64_t, std::string>> wanted;
  for (size_t k : to_insert)
    wanted.emplace(cands[k].community_id, cands[k].ev->id);
  for (const auto& key : inserted)
    if (!wanted.count(key))
      throw std::logic_error("one-statement write stored an event the checks refused");
  mark_inserted(inserted);
}

// S6, in the batch's transaction.
using mention_sink = std::function<void(const std::vector<mention_source>& inserted)>;

// The batch in two phases, whatever runs them: phase A (S0 lock, S1 check)
// whose answers decide each candidate, then phase B (S2 replace, S3 insert,
// S4 delete, S5 ttl). Phase B's statements do not depend on one another's
// answers (a client with pipelining could send each phase at once). S6
// needs S3's answer, so it follows phase B.
// A batch of plain candidates only (batch_write::all_plain) is ONE statement
// instead (S1 and S3 together), run by `run_single` when it is given.
using single_runner = std::function<pqxx::result(statement_call&& call)>;

std::vector<write_result> write_in_phases(const std::vector<ingest_item>& items,
                                          const write_options& opts, const phase_runner& run,
                                          const mention_sink& enqueue,
                                          const single_runner& run_single) {
  batch_write b(items, opts);
  b.collect_candidates();
  b.drop_batch_losers();
  b.sort_for_insertion();
  if (b.cands.empty()) {
    b.finish_aliases();
    return std::move(b.results);
  }
  if (run_single && b.all_plain()) {
    // No loser can be in the batch (losers are coordinates): no
    // finish_batch_losers; nothing for S6 (no mention to enqueue).
    b.read_check_insert(run_single(b.check_insert_call()));
    b.finish_aliases();
    return std::move(b.results);
  }

  std::vector<statement_call> phase_a;
  b.add_lock_call(phase_a);
  b.add_check_call(phase_a);
  b.read_checks(run(std::move(phase_a)).back());
  b.decide();

  std::vector<statement_call> phase_b;
  b.add_replace_call(phase_b);
  b.add_insert_call(phase_b);
  b.add_delete_and_ttl_calls(phase_b);
  b.read_writes(run(std::move(phase_b)));
  enqueue(b.inserted_events);

  b.finish_batch_losers();
  b.finish_aliases();
  return std::move(b.results);
}
// S7: the push gate for the inserted push-kind events of gated communities.
void gate_inserted(pqxx::work& tx, const std::vector<mention_source>& inserted,
                   const write_options& opts) {
  std::vector<gated_event> gated;
  for (const auto& s : inserted) {
    if (!proto::push::is_push_kind(s.ev->kind))
      continue;
    if (opts.push_gated && std::find(opts.push_gated->begin(), opts.push_gated->end(),
                                     s.community_id) == opts.push_gated->end())
      continue;
    gated.push_back({s.community_id, s.ev->id, s.ev->kind});
  }
  if (!gated.empty())
    gate_push_jobs(tx, gated);
}
}  // namespace

namespace {
std::vector<pqxx::result> exec_all(pqxx::transaction_base& tx, std::vector<statement_call>&& calls) {
  prepare_statements(tx.conn());
  std::vector<pqxx::result> out;
  for (auto& c : calls)
    out.push_back(tx.exec_prepared(c.name, pqxx::prepare::make_dynamic_params(c.params)));
  return out;
}
}  // namespace

std::vector<write_result> write_events(pqxx::work& tx, const std::vector<ingest_item>& items,
                                       const write_options& opts) {
  // Inside the caller's transaction: one statement at a time (a plain batch
  // as its one statement).
  return write_in_phases(
    items, opts,
    [&tx](std::vector<statement_call>&& calls) { return exec_all(tx, std::move(calls)); },
    [&tx, &opts](const std::vector<mention_source>& inserted) {
      enqueue_mentions(tx, inserted);
      gate_inserted(tx, inserted, opts);
    },
    [&tx](statement_call&& call) { return exec_all(tx, {std::move(call)}).front(); });
}

std::vector<write_result> write_batch(pqxx::connection& conn,
                                      const std::vector<ingest_item>& items,
                                      const write_options& opts) {
  // One statement per round trip, values always as parameters of the
  // prepared statements. Sending a phase as one query string of EXECUTEs
  // (libpqxx's pipeline) saved two round trips but put event contents into
  // the SQL text, which PostgreSQL logs on any error and shows in
  // pg_stat_activity (docs/benchmarks.md, "What would move it").
  //
  // A plain batch (the common one: messages outside channels, no mention,
  // no replaceable kind) is one statement outside an explicit transaction,
  // so its own transaction: one round trip, and OK still only once its
  // COMMIT returned (the statement's result is read after the server's
  // ReadyForQuery, which follows the commit and its WAL flush). The test
  // and lease hooks need an explicit transaction: they take the phases.
  bool single = !opts.after_write && !opts.before_commit;
  std::optional<pqxx::work> tx;
  auto results = write_in_phases(
    items, opts,
    [&](std::vector<statement_call>&& calls) {
      if (!tx)
        tx.emplace(conn);
      return exec_all(*tx, std::move(calls));
    },
    [&](const std::vector<mention_source>& inserted) {
      enqueue_mentions(*tx, inserted);
      gate_inserted(*tx, inserted, opts);
    },
    single ? single_runner([&conn](statement_call&& call) {
      pqxx::nontransaction auto_commit(conn);
      return exec_all(auto_commit, {std::move(call)}).front();
    })
           : single_runner{});
  if (!tx) {
    if (!opts.after_write && !opts.before_commit)
      return results;
    // Nothing reached the database (every item answered before it): the
    // hooks still see their transaction.
    tx.emplace(conn);
  }
  if (opts.after_write && !opts.after_write(*tx, results)) {
    tx->abort();
    return results;
  }
  if (opts.before_commit)
    opts.before_commit();
  tx->commit();
  return results;
}

}  // namespace waggle::db
