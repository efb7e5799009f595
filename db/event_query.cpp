#include "db/event_store.hpp"
#include "db/prepared_reads.hpp"
#include "db/read_budget.hpp"
#include "db/sql_util.hpp"
#include "messages/proto/negentropy.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <map>
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

// The read path for events: REQ history, NIP-45 counts and NIP-50 search
// (docs/search.md). Every statement carries the community predicate; each
// filter is one statement.

namespace waggle::db {

using namespace sql;

// ---- reads ----------------------------------------------------------------------

namespace {

const std::vector<std::string>* list_of(const std::optional<std::vector<std::string>>& v) {
  return v ? &*v : nullptr;
}
[[maybe_unused]] const std::vector<std::string>* list_of(const std::vector<std::string>& v) {
  return v.empty() ? nullptr : &v;
}

class params {
 public:
  std::string add(std::string v) {
    values_.push_back(std::move(v));
    // Appended, not "$" + string: GCC 12 warns (-Wrestrict, a false positive)
    // on operator+(const char*, string&&) in optimised builds.
    std::string placeholder = "$";
    placeholder += std::to_string(values_.size());
    return placeholder;
  }
  const std::vector<std::string>& values() const { return values_; }

 private:
  std::vector<std::string> values_;
};

// A filter reduced to what history can match. `empty` = matches nothing.
struct plan {
  bool empty = false;
  std::optional<std::vector<std::string>> ids, authors;  // 64-hex, distinct
  std::optional<std::vector<int32_t>> kinds;
  std::map<char, std::vector<std::string>> tags;  // indexable values, distinct
  std::optional<int64_t> since, until;
  uint32_t limit = 0;
  int64_t now = 0;  // NIP-40: rows with expires_at <= now are not served
  // A later page: only rows past this (created_at, id hex) in history
  // order (newest first, ties by id ascending).
  std::optional<std::pair<int64_t, std::string>> after;
  // NIP-50: the words searched for (proto::search_terms), never empty.
  std::optional<std::string> search;
  // The words as a quoted SQL literal (the connection's own escaping), not a
  // parameter: a reader session keeps generic plans, and a generic plan
  // cannot know how common the words are, which decides the plan.
  std::string search_literal;
  uint32_t max_ranked = 0;  // the newest matches a search ranks (0: no cap)
};

// Rows past the page horizon on (created_at, id) columns: the `<=` on
// created_at alone is what an index range scan can use; the rest settles the
// second that holds the horizon.
std::string after_conditions(const plan& p, params& ps, const char* created_at, const char* id) {
  if (!p.after)
    return "";
  std::string c = ps.add(std::to_string(p.after->first)) + "::bigint";
  std::string i = "decode(" + ps.add(p.after->second) + ", 'hex')";
  return std::string(" AND ") + created_at + " <= " + c + " AND (" + created_at + " < " + c +
         " OR " + id + " > " + i + ")";
}

std::optional<std::vector<std::string>> hex_list(const std::vector<std::string>* v, bool& empty) {
  if (!v)
    return std::nullopt;
  std::set<std::string> s;
  for (const auto& x : *v)
    if (is_hex64(x))
      s.insert(x);
  if (s.empty())
    empty = true;  // present, and nothing in it can match
  return std::vector<std::string>(s.begin(), s.end());
}

plan plan_of(const proto::filter& f, const proto::filter_limits& lim, bool for_count,
             int64_t now) {
  plan p;
  p.now = now;
  if (f.matches_nothing()) {
    p.empty = true;
    return p;
  }
  p.ids = hex_list(list_of(f.ids), p.empty);
  p.authors = hex_list(list_of(f.authors), p.empty);
  if (f.kinds) {
    std::set<int32_t> s(f.kinds->begin(), f.kinds->end());
    if (s.empty())
      p.empty = true;
    p.kinds = std::vector<int32_t>(s.begin(), s.end());
  }
  for (const auto& [letter, values] : f.tags) {
    std::set<std::string> s;
    for (const auto& v : values)
      if (v.size() <= max_indexed_tag_value && v.find('\0') == std::string::npos)
        s.insert(v);
    if (!is_letter(letter) || s.empty()) {
      p.empty = true;  // only single-letter tags with short values are indexed
      continue;
    }
    p.tags[letter] = std::vector<std::string>(s.begin(), s.end());
  }
  p.since = f.since;
  p.until = f.until;
  if (p.since && p.until && *p.since > *p.until)
    p.empty = true;
  if (f.search) {
    p.search = proto::search_terms(*f.search);
    if (p.search->empty())
      p.empty = true;  // nothing to search for matches nothing
    p.max_ranked = lim.max_search_ranked;
  }
  if (!for_count) {
    p.limit = std::min(f.effective_limit(lim), lim.max_limit);
    if (p.limit == 0)
      p.empty = true;
  }
  return p;
}

std::string text_array(const std::vector<std::string>& v) {
  array_literal a;
  for (const auto& x : v)
    a.text(x);
  return a.str();
}
std::string bytea_array(const std::vector<std::string>& hex) {
  array_literal a;
  for (const auto& x : hex)
    a.bytea_hex(x);
  return a.str();
}
std::string int_array(const std::vector<int32_t>& v) {
  array_literal a;
  for (auto x : v)
    a.integer(x);
  return a.str();
}

// The tag list that drives a tag query: fewest values, then letter order.
char driving_tag(const plan& p) {
  char best = 0;
  size_t n = SIZE_MAX;
  for (const auto& [letter, values] : p.tags)
    if (values.size() < n) {
      best = letter;
      n = values.size();
    }
  return best;
}

// Conditions on events `e`: always the community and liveness, plus the
// filter's fields except those the caller already applies on its driver
// (skip_authors / skip_kinds / skip_time: checked on event_tags `t`). Tag
// conditions other than the driving tag become EXISTS probes that are fully
// qualified on event_tags_lookup.
std::string event_conditions(const plan& p, params& ps, const std::string& community,
                             char driver_tag, bool skip_authors, bool skip_kinds,
                             bool skip_time) {
  std::string w = "e.community_id = " + community + " AND e.deleted_at IS NULL";
  // NIP-40: an expired row is invisible from its expiration second on, until
  // the reaper deletes it. Every driver below reads the events row anyway (for
  // deleted_at, channel and raw), so this is a test on a row already fetched,
  // never an extra probe.
  w += " AND (e.expires_at IS NULL OR e.expires_at > " + ps.add(std::to_string(p.now)) +
       "::bigint)";
  // Push leases (kind 30350) carry the endpoint grant that addresses a phone:
  // write-only, never served (docs/push.md, "Leases").
  w += " AND e.kind <> 30350";
  // Channel events (NIP-29) are read only by filters that name their
  // channels with #h, which the caller access-checked.
  if (!p.tags.contains('h'))
    w += " AND e.channel IS NULL";
  if (p.ids)
    w += " AND e.id = ANY(" + ps.add(bytea_array(*p.ids)) + "::bytea[])";
  if (p.authors && !skip_authors)
    w += " AND e.pubkey = ANY(" + ps.add(bytea_array(*p.authors)) + "::bytea[])";
  if (p.kinds && !skip_kinds)
    w += " AND e.kind = ANY(" + ps.add(int_array(*p.kinds)) + "::int[])";
  if (!skip_time) {
    if (p.since)
      w += " AND e.created_at >= " + std::to_string(*p.since);
    if (p.until)
      w += " AND e.created_at <= " + std::to_string(*p.until);
    w += after_conditions(p, ps, "e.created_at", "e.id");
  }
  for (const auto& [letter, values] : p.tags) {
    if (letter == driver_tag)
      continue;
    w += " AND EXISTS (SELECT 1 FROM event_tags x WHERE x.community_id = e.community_id AND x.name = " +
         ps.add(std::string(1, letter)) + " AND x.value = ANY(" + ps.add(text_array(values)) +
         "::text[]) AND x.created_at = e.created_at AND x.event_id = e.id)";
  }
  return w;
}

// One SELECT returning (raw, created_at, id hex) of the filter's newest
// `limit` live events, newest first, ties by id.
// Conditions that event_tags rows can answer from their own columns (kind,
// pubkey, created_at are denormalised there), so the tag index scan filters
// before joining events.
std::string tag_row_conditions(const plan& p, params& ps) {
  std::string t;
  if (p.kinds)
    t += " AND t.kind = ANY(" + ps.add(int_array(*p.kinds)) + "::int[])";
  if (p.authors)
    t += " AND t.pubkey = ANY(" + ps.add(bytea_array(*p.authors)) + "::bytea[])";
  if (p.since)
    t += " AND t.created_at >= " + std::to_string(*p.since);
  if (p.until)
    t += " AND t.created_at <= " + std::to_string(*p.until);
  t += after_conditions(p, ps, "t.created_at", "t.event_id");
  return t;
}

// NIP-50: the filter's matches by the search index (events_live_search,
// leading with community_id). The tsquery is a function in FROM so it is
// parsed once per statement, folded to a constant: the words are a literal
// (plan::search_literal); websearch_to_tsquery never raises on its input.
std::string tsquery_of(const plan& p) {
  return "websearch_to_tsquery('simple', " + p.search_literal + "::text)";
}

std::string search_from(const plan& p) {
  return "FROM events e CROSS JOIN " + tsquery_of(p) + " AS q WHERE e.search @@ q AND ";
}

// Only the newest `max_ranked` matches are ranked (docs/search.md, "Cost"):
// ranking every match made a word in most of a community's events cost a
// sort of all of them. Planned with its words, the inner query reads a rare
// word's few matches by the search index and a common word's newest rows by
// the created_at index, stopping at the cap.
std::string search_sql(const plan& p, params& ps, const std::string& community) {
  std::string inner = "SELECT e.raw, e.created_at, e.id, e.search " + search_from(p) +
                      event_conditions(p, ps, community, 0, false, false, false);
  if (p.max_ranked > 0)
    inner += " ORDER BY e.created_at DESC, e.id LIMIT " + std::to_string(p.max_ranked);
  return "SELECT m.raw, m.created_at, encode(m.id, 'hex') FROM (" + inner + ") AS m CROSS JOIN " +
         tsquery_of(p) + " AS q ORDER BY ts_rank(m.search, q) DESC, m.created_at DESC, m.id LIMIT " +
         std::to_string(p.limit);
}

std::string history_sql(const plan& p, params& ps, const std::string& community) {
  const std::string lim = std::to_string(p.limit);
  if (p.search)
    return search_sql(p, ps, community);
  if (p.ids) {
    // At most max_values rows by primary key: no driver needed.
    return "SELECT e.raw, e.created_at, encode(e.id, 'hex') FROM events e WHERE " +
           event_conditions(p, ps, community, 0, false, false, false) +
           " ORDER BY e.created_at DESC, e.id LIMIT " + lim;
  }
  if (!p.tags.empty()) {
    // Drive from event_tags: per value, an index-ordered scan that stops after
    // `limit` live matches; the per-value lists are merged and de-duplicated
    // (an event can carry several of the values).
    char letter = driving_tag(p);
    std::string t = "t.community_id = " + community + " AND t.name = " +
                    ps.add(std::string(1, letter)) + " AND t.value = v.value";
    t += tag_row_conditions(p, ps);
    return "SELECT DISTINCT ON (m.created_at, m.id) m.raw, m.created_at, encode(m.id, 'hex') "
           "FROM unnest(" + ps.add(text_array(p.tags.at(letter))) + "::text[]) AS v(value) "
           "CROSS JOIN LATERAL (SELECT e.raw, e.created_at, e.id FROM event_tags t "
           "JOIN events e ON e.community_id = t.community_id AND e.id = t.event_id WHERE " + t +
           " AND " + event_conditions(p, ps, community, letter, true, true, true) +
           " ORDER BY t.created_at DESC, t.event_id LIMIT " + lim + ") AS m "
           "ORDER BY m.created_at DESC, m.id LIMIT " + lim;
  }
  // Per value of the list, newest first on that column's index, then merged:
  // each value reads at most `lim` rows, however many rows the others have.
  auto per_value_merge = [&](const std::string& values, const char* column,
                             const std::string& conditions) {
    return "SELECT m.raw, m.created_at, encode(m.id, 'hex') FROM unnest(" + values +
           ") AS v(x) CROSS JOIN LATERAL (SELECT e.raw, e.created_at, e.id FROM events e WHERE e." +
           column + " = v.x AND " + conditions + " ORDER BY e.created_at DESC, e.id LIMIT " + lim +
           ") AS m ORDER BY m.created_at DESC, m.id LIMIT " + lim;
  };
  if (p.authors)  // events_live_pubkey
    return per_value_merge(ps.add(bytea_array(*p.authors)) + "::bytea[]", "pubkey",
                           event_conditions(p, ps, community, 0, true, false, false));
  if (p.kinds)  // events_live_kind
    return per_value_merge(ps.add(int_array(*p.kinds)) + "::int[]", "kind",
                           event_conditions(p, ps, community, 0, false, true, false));
  return "SELECT e.raw, e.created_at, encode(e.id, 'hex') FROM events e WHERE " +
         event_conditions(p, ps, community, 0, false, false, false) +
         " ORDER BY e.created_at DESC, e.id LIMIT " + lim;
}

// The ids of all live events matching the filter (for COUNT), with their
// created_at as a second column when `with_time` (NIP-77's items).
std::string ids_sql(const plan& p, params& ps, const std::string& community,
                    bool with_time = false) {
  const std::string e_cols = with_time ? "e.id AS id, e.created_at AS created_at" : "e.id AS id";
  if (p.search)
    return "SELECT " + e_cols + " " + search_from(p) +
           event_conditions(p, ps, community, 0, false, false, false);
  if (!p.ids && !p.tags.empty()) {
    char letter = driving_tag(p);
    std::string t = "t.community_id = " + community + " AND t.name = " +
                    ps.add(std::string(1, letter)) + " AND t.value = ANY(" +
                    ps.add(text_array(p.tags.at(letter))) + "::text[])";
    t += tag_row_conditions(p, ps);
    return std::string("SELECT t.event_id AS id") + (with_time ? ", t.created_at AS created_at" : "") +
           " FROM event_tags t JOIN events e ON e.community_id = t.community_id "
           "AND e.id = t.event_id WHERE " + t + " AND " +
           event_conditions(p, ps, community, letter, true, true, true);
  }
  return "SELECT " + e_cols + " FROM events e WHERE " +
         event_conditions(p, ps, community, 0, false, false, false);
}

std::string field_string(const pqxx::field& f) { return std::string(f.c_str(), f.size()); }

// Prepared when the caller keeps statements (a reader session), else parsed
// and planned with its values as one unnamed statement.
pqxx::result run(pqxx::transaction_base& tx, prepared_reads* prepared, const std::string& sql,
                 const params& ps) {
  if (!prepared)
    return tx.exec_params(sql, pqxx::prepare::make_dynamic_params(ps.values()));
  return tx.exec_prepared(prepared->name_for(tx.conn(), sql),
                          pqxx::prepare::make_dynamic_params(ps.values()));
}

bool has_search(const std::vector<proto::filter>& filters) {
  return std::any_of(filters.begin(), filters.end(), [](const auto& f) { return f.search.has_value(); });
}

// A read with a search filter is ONE page (docs/search.md, "Pages"): ranked
// rows have no created_at horizon to continue from. Every filter reads its
// whole limit; the search filters' rows come first, each filter's in rank
// order, in filter order; then the other filters' rows, newest first (ties
// by id); an event is sent once, at its first place.
history_page_result search_page(pqxx::connection& conn, const std::string& community_value,
                                std::vector<plan>& plans, read_budget* budget,
                                prepared_reads* prepared, std::chrono::milliseconds search_ceiling) {
  struct row {
    int64_t created_at;
    std::string id;
    std::string raw;
  };
  std::vector<row> ranked, rest;
  pqxx::nontransaction tx(conn);  // autocommit, as query_events_page says why
  for (auto& p : plans) {
    if (p.empty)
      continue;
    params ps;
    std::string community = ps.add(community_value) + "::bigint";
    if (p.search)
      p.search_literal = tx.quote(*p.search);
    std::string sql = history_sql(p, ps, community);
    // A search has its own ceiling, and its plan is made with its words
    // (how common they are decides the plan), so it is never prepared.
    before_statement(budget, tx, p.search ? search_ceiling : std::chrono::milliseconds{0});
    auto r = run(tx, p.search ? nullptr : prepared, sql, ps);
    auto& into = p.search ? ranked : rest;
    for (const auto& rr : r)
      into.push_back({rr[1].as<int64_t>(), rr[2].as<std::string>(), field_string(rr[0])});
  }
  tx.commit();
  std::stable_sort(rest.begin(), rest.end(), [](const row& a, const row& b) {
    return a.created_at != b.created_at ? a.created_at > b.created_at : a.id < b.id;
  });
  history_page_result out;
  std::unordered_set<std::string> seen;
  for (auto* rows : {&ranked, &rest})
    for (auto& r : *rows)
      if (seen.insert(r.id).second)
        out.raws.push_back(std::move(r.raw));
  return out;  // more = false: the whole answer is this page
}

}  // namespace

std::vector<std::string> query_events(pqxx::connection& conn, int64_t community_id,
                                      const std::vector<proto::filter>& filters,
                                      const proto::filter_limits& lim, int64_t now,
                                      read_budget* budget) {
  return query_events_page(conn, community_id, filters, lim, now, history_page{}, budget).raws;
}

history_page_result query_events_page(pqxx::connection& conn, int64_t community_id,
                                      const std::vector<proto::filter>& filters,
                                      const proto::filter_limits& lim, int64_t now,
                                      const history_page& at, read_budget* budget,
                                      prepared_reads* prepared) {
  struct row {
    int64_t created_at;
    std::string id;
    std::string raw;
  };
  // History order: newest first, ties by id ascending.
  auto before = [](int64_t ca, const std::string& ia, int64_t cb, const std::string& ib) {
    return ca != cb ? ca > cb : ia < ib;
  };
  std::vector<plan> plans;
  plans.reserve(filters.size());
  for (const auto& f : filters)
    plans.push_back(plan_of(f, lim, false, now));
  if (has_search(filters)) {
    // One page, so a "later page" (a caller's bug) has nothing left to send.
    if (at.started)
      return {};
    return search_page(conn, std::to_string(community_id), plans, budget, prepared,
                       std::chrono::milliseconds{lim.search_timeout_ms});
  }
  std::vector<uint32_t> remaining = at.remaining;
  if (remaining.size() != filters.size()) {  // the first page: each filter's limit
    remaining.assign(filters.size(), 0);
    for (size_t i = 0; i < filters.size(); ++i)
      if (!plans[i].empty)
        remaining[i] = plans[i].limit;
  }
  std::vector<std::vector<row>> fetched(filters.size());
  std::vector<bool> truncated(filters.size(), false);
  // Autocommit, no BEGIN READ ONLY / COMMIT: under READ COMMITTED each
  // statement reads its own snapshot inside a transaction too, so one
  // around the filters bought nothing but two round trips (db/read_budget.hpp).
  pqxx::nontransaction tx(conn);
  for (size_t i = 0; i < filters.size(); ++i) {
    if (remaining[i] == 0 || plans[i].empty)
      continue;
    plan& p = plans[i];
    p.limit = at.rows == 0 ? remaining[i] : std::min(at.rows, remaining[i]);
    if (at.started)
      p.after = std::pair{at.horizon_created_at, at.horizon_id};
    params ps;
    std::string community = ps.add(std::to_string(community_id)) + "::bigint";
    std::string sql = history_sql(p, ps, community);
    before_statement(budget, tx);  // each filter's statement gets what is left
    auto r = run(tx, prepared, sql, ps);
    for (const auto& rr : r)
      fetched[i].push_back({rr[1].as<int64_t>(), rr[2].as<std::string>(), field_string(rr[0])});
    // Full and short of its limit: this filter may have more past its last row.
    truncated[i] = fetched[i].size() == p.limit && p.limit < remaining[i];
  }
  tx.commit();
  // The new horizon: the newest last row of a filter that may have more.
  // Every filter has read all it owes up to there; past it, a filter that
  // stopped short may still own rows it has not read, so rows past the
  // horizon wait for the next page (read again there, never held here).
  const row* horizon = nullptr;
  for (size_t i = 0; i < filters.size(); ++i)
    if (truncated[i]) {
      const row& last = fetched[i].back();
      if (!horizon || before(last.created_at, last.id, horizon->created_at, horizon->id))
        horizon = &last;
    }
  auto within = [&](const row& r) {
    return !horizon || !before(horizon->created_at, horizon->id, r.created_at, r.id);
  };
  history_page_result out;
  std::vector<row*> rows;
  std::unordered_set<std::string_view> seen;
  for (size_t i = 0; i < filters.size(); ++i) {
    uint32_t taken = 0;
    bool all_within = true;
    for (auto& r : fetched[i]) {
      if (!within(r)) {
        all_within = false;
        continue;
      }
      ++taken;
      if (seen.insert(r.id).second)
        rows.push_back(&r);
    }
    remaining[i] -= std::min(remaining[i], taken);
    // Read to its end and all of it sent: nothing more to read for it.
    if (!truncated[i] && all_within)
      remaining[i] = 0;
  }
  std::sort(rows.begin(), rows.end(), [&](const row* a, const row* b) {
    return before(a->created_at, a->id, b->created_at, b->id);
  });
  out.raws.reserve(rows.size());
  for (auto* r : rows)
    out.raws.push_back(std::move(r->raw));
  out.more = std::any_of(remaining.begin(), remaining.end(), [](uint32_t n) { return n > 0; });
  if (out.more) {
    out.next.rows = at.rows;
    out.next.started = true;
    out.next.horizon_created_at = horizon->created_at;
    out.next.horizon_id = horizon->id;
    out.next.remaining = std::move(remaining);
  }
  return out;
}

uint64_t count_events(pqxx::connection& conn, int64_t community_id,
                      const std::vector<proto::filter>& filters, int64_t now,
                      read_budget* budget, prepared_reads* prepared,
                      const proto::filter_limits& lim) {
  params ps;
  std::string community = ps.add(std::to_string(community_id)) + "::bigint";
  std::string unioned;
  proto::filter_limits unlimited;
  for (const auto& f : filters) {
    plan p = plan_of(f, unlimited, true, now);
    if (p.empty)
      continue;
    if (p.search)
      p.search_literal = conn.quote(*p.search);
    if (!unioned.empty())
      unioned += " UNION ALL ";
    unioned += '(';
    unioned += ids_sql(p, ps, community);
    unioned += ')';
  }
  if (unioned.empty())
    return 0;
  pqxx::nontransaction tx(conn);  // one statement: a transaction adds only round trips
  const bool search = has_search(filters);
  before_statement(budget, tx,
                   search ? std::chrono::milliseconds{lim.search_timeout_ms} : std::chrono::milliseconds{0});
  auto r = run(tx, search ? nullptr : prepared,
               "SELECT count(DISTINCT matched.id) FROM (" + unioned + ") AS matched", ps);
  tx.commit();
  return r[0][0].as<uint64_t>();
}

sync_items_result sync_items(pqxx::connection& conn, int64_t community_id,
                             const std::vector<proto::filter>& filters, int64_t now,
                             size_t max_items, read_budget* budget, prepared_reads* prepared) {
  params ps;
  std::string community = ps.add(std::to_string(community_id)) + "::bigint";
  std::string unioned;
  proto::filter_limits unlimited;
  for (const auto& f : filters) {
    plan p = plan_of(f, unlimited, true, now);
    if (p.empty || p.search)  // search is refused before it gets here
      continue;
    if (!unioned.empty())
      unioned += " UNION ALL ";
    unioned += '(';
    unioned += ids_sql(p, ps, community, true);
    unioned += ')';
  }
  sync_items_result out;
  if (unioned.empty())
    return out;
  // A transaction only for SET LOCAL: this statement reads every match, so
  // a nested loop is never its plan. With statistics taken while the tables
  // were nearly empty (a burst of writes the autovacuum has not analysed yet)
  // the planner chose one over two sequential scans, quadratic in the rows:
  // 1.2 s for 3,000 events, past the statement timeout at 10,000.
  pqxx::work tx(conn);
  tx.exec("SET LOCAL enable_nestloop = off");
  before_statement(budget, tx);
  // One row past the cap tells "more than allowed" from "exactly allowed".
  auto r = run(tx, prepared,
               "SELECT DISTINCT m.created_at, encode(m.id, 'hex') FROM (" + unioned +
                 ") AS m ORDER BY 1, 2 LIMIT " + std::to_string(max_items + 1),
               ps);
  tx.commit();
  if (r.size() > max_items) {
    out.too_many = true;
    return out;
  }
  out.packed.reserve(r.size() * proto::negentropy::packed_item_bytes);
  for (const auto& row : r) {
    auto created_at = row[0].as<int64_t>();
    auto id = row[1].as<std::string>();
    if (created_at < 0 || !proto::negentropy::append_packed(out.packed, static_cast<uint64_t>(created_at), id))
      continue;  // NIP-77 time is unsigned; no such row is accepted by ingest
    ++out.count;
  }
  return out;
}

}  // namespace waggle::db
