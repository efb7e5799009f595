// The read path: query_events (REQ history) and count_events (NIP-45).

#include <algorithm>
#include <random>
#include <set>

#include "messages/proto/filter.hpp"
#include "tests/support/pg_fixture.hpp"

namespace waggle::pgtest {
namespace {

// A small community with a known set of events, shared by the tests of this
// file (written once per process).
class QueryTest : public PgTest {
 protected:
  struct corpus {
    int64_t community_id = 0;
    int64_t other_community_id = 0;
    std::vector<proto::event> events;  // every event written, in order
    std::set<std::string> deleted;     // ids soft-deleted (deletion targets, replaced heads)
  };

  void SetUp() override {
    PgTest::SetUp();
    if (HasFatalFailure())
      return;
    static corpus* built = nullptr;
    if (!built) {
      built = new corpus(build());
    }
    data_ = built;
  }

  corpus build() {
    corpus c;
    c.community_id = community("corpus");
    c.other_community_id = community("other");
    std::vector<proto::event> evs;
    // Five authors, kinds 1/7/9, tags h (channel), p (mention), e (reply), t.
    std::mt19937 rng(42);
    for (int i = 0; i < 120; ++i) {
      int author = 1 + static_cast<int>(rng() % 5);
      int32_t kind = std::array<int32_t, 3>{1, 7, 9}[rng() % 3];
      // Many equal timestamps, so ties by id are exercised.
      int64_t created_at = 1000 + static_cast<int64_t>(rng() % 40);
      std::vector<proto::tag> tags;
      tags.push_back({"g", "room" + std::to_string(rng() % 4)});
      if (rng() % 3 == 0)
        tags.push_back({"p", proto::pubkey_of(secret(1 + static_cast<int>(rng() % 5)))});
      if (rng() % 4 == 0)
        tags.push_back({"t", "topic" + std::to_string(rng() % 3)});
      if (rng() % 5 == 0)
        tags.push_back({"g", "room" + std::to_string(rng() % 4)});  // second g tag
      if (rng() % 6 == 0 && !evs.empty())
        tags.push_back({"e", evs[rng() % evs.size()].id, "", "reply"});
      evs.push_back(make_event(author, kind, created_at, tags, "event " + std::to_string(i)));
    }
    // A long tag value (not indexed), a replaceable pair, and deletions.
    evs.push_back(make_event(1, 1, 1050, {{"t", std::string(300, 'L')}}, "long tag"));
    evs.push_back(make_event(2, 0, 900, {}, "profile old"));
    evs.push_back(make_event(2, 0, 950, {}, "profile new"));
    evs.push_back(make_event(3, 30023, 990, {{"d", "doc"}, {"g", "room1"}}, "doc"));
    // "profile old" first, on its own, so that the big batch replaces it.
    const auto& profile_old = evs[evs.size() - 3];
    EXPECT_EQ(db::write_batch(conn(), batch(c.community_id, {profile_old})).at(0).outcome,
              write_outcome::stored);
    auto r = db::write_batch(conn(), batch(c.community_id, evs));
    for (size_t i = 0; i < r.size(); ++i)
      EXPECT_EQ(r[i].outcome, &evs[i] == &profile_old ? write_outcome::superseded : write_outcome::stored) << i;
    c.deleted.insert(profile_old.id);  // replaced by "profile new"
    // Author 1 deletes two of their own events and one of author 2.
    std::vector<std::string> targets;
    for (const auto& ev : evs)
      if (ev.pubkey == proto::pubkey_of(secret(1)) && ev.kind == 9 && targets.size() < 2)
        targets.push_back(ev.id);
    std::string foreign;
    for (const auto& ev : evs)
      if (ev.pubkey == proto::pubkey_of(secret(2)) && ev.kind == 9)
        foreign = ev.id;
    auto del = make_event(1, 5, 1100, {{"e", targets.at(0)}, {"e", targets.at(1)}, {"e", foreign}});
    EXPECT_EQ(db::write_batch(conn(), batch(c.community_id, {del})).at(0).outcome,
              write_outcome::stored);
    c.deleted.insert(targets.begin(), targets.end());
    evs.push_back(del);
    // Noise in another community that must never show up.
    std::vector<proto::event> noise;
    for (int i = 0; i < 20; ++i)
      noise.push_back(make_event(1 + i % 5, 9, 1000 + i, {{"g", "room0"}}, "noise " + std::to_string(i)));
    db::write_batch(conn(), batch(c.other_community_id, noise));
    c.events = std::move(evs);
    return c;
  }

  // The oracle: proto::matches over the live events, newest first, ties by id.
  std::vector<const proto::event*> expected_all(const proto::filter& f) const {
    std::vector<const proto::event*> out;
    if (f.matches_nothing())
      return out;
    for (const auto& ev : data_->events) {
      if (data_->deleted.count(ev.id) || !proto::matches(f, ev))
        continue;
      // History cannot match tag values longer than the index holds.
      bool long_value = false;
      for (const auto& [letter, values] : f.tags) {
        bool any_short = false;
        for (const auto& t : ev.tags)
          if (t.size() >= 2 && t[0].size() == 1 && t[0][0] == letter &&
              std::find(values.begin(), values.end(), t[1]) != values.end() &&
              t[1].size() <= db::max_indexed_tag_value)
            any_short = true;
        if (!any_short)
          long_value = true;
      }
      if (!long_value)
        out.push_back(&ev);
    }
    std::sort(out.begin(), out.end(), [](const proto::event* a, const proto::event* b) {
      return a->created_at != b->created_at ? a->created_at > b->created_at : a->id < b->id;
    });
    return out;
  }

  std::vector<std::string> expected(const std::vector<proto::filter>& fs,
                                    const proto::filter_limits& lim = {}) const {
    std::map<std::string, const proto::event*> picked;
    size_t cap = 0;
    for (const auto& f : fs) {
      if (f.matches_nothing())
        continue;
      auto all = expected_all(f);
      size_t n = std::min<size_t>(f.effective_limit(lim), lim.max_limit);
      cap += n;
      for (size_t i = 0; i < all.size() && i < n; ++i)
        picked[all[i]->id] = all[i];
    }
    std::vector<const proto::event*> v;
    for (auto& [id, ev] : picked)
      v.push_back(ev);
    std::sort(v.begin(), v.end(), [](const proto::event* a, const proto::event* b) {
      return a->created_at != b->created_at ? a->created_at > b->created_at : a->id < b->id;
    });
    if (v.size() > cap)
      v.resize(cap);
    std::vector<std::string> out;
    for (auto* ev : v)
      out.push_back(ev->raw);
    return out;
  }

  uint64_t expected_count(const std::vector<proto::filter>& fs) const {
    std::set<std::string> ids;
    for (const auto& f : fs)
      for (auto* ev : expected_all(f))
        ids.insert(ev->id);
    return ids.size();
  }

  std::vector<std::string> query(const std::vector<proto::filter>& fs,
                                 const proto::filter_limits& lim = {}) {
    return db::query_events(conn(), data_->community_id, fs, lim, wall_now());
  }

  // "created_at:id-prefix" per event, for readable failure messages.
  std::vector<std::string> brief(const std::vector<std::string>& raws) const {
    std::vector<std::string> out;
    for (const auto& raw : raws) {
      auto i = raw.find("\"id\":\"");
      auto c = raw.find("\"created_at\":");
      out.push_back((c == std::string::npos ? "?" : raw.substr(c + 13, raw.find(',', c) - c - 13)) +
                    ":" + (i == std::string::npos ? raw : raw.substr(i + 6, 8)));
    }
    return out;
  }

  // The same history read in pages of `rows` per filter, concatenated.
  std::vector<std::string> query_paged(const std::vector<proto::filter>& fs, uint32_t rows,
                                       size_t* pages = nullptr) {
    std::vector<std::string> out;
    history_page page;
    page.rows = rows;
    size_t n = 0;
    for (; n < 10'000; ++n) {
      auto r = db::query_events_page(conn(), data_->community_id, fs, {}, wall_now(), page);
      out.insert(out.end(), r.raws.begin(), r.raws.end());
      if (!r.more)
        break;
      page = std::move(r.next);
    }
    if (pages)
      *pages = n + 1;
    return out;
  }

  void check(const std::vector<proto::filter>& fs, const std::string& label) {
    auto want = expected(fs);
    auto got = query(fs);
    EXPECT_EQ(brief(got), brief(want)) << label;
    EXPECT_TRUE(got == want) << label << ": same events, different bytes";
    // Read in pages, however small, the history is the same, in the same
    // order, each event once (docs/protocol.md, "History in pages").
    for (uint32_t rows : {1u, 2u, 7u}) {
      size_t pages = 0;
      auto paged = query_paged(fs, rows, &pages);
      EXPECT_EQ(brief(paged), brief(want)) << label << " in pages of " << rows;
      // Every page but the last sends at least one event.
      EXPECT_LE(pages, want.size() + 1) << label << " in pages of " << rows;
    }
    EXPECT_EQ(db::count_events(conn(), data_->community_id, fs, wall_now()), expected_count(fs)) << label;
  }

  std::string pk(int n) const { return proto::pubkey_of(secret(n)); }

  const corpus* data_ = nullptr;
};

proto::filter with_limit(proto::filter f, uint32_t n) {
  f.limit = n;
  return f;
}

TEST_F(QueryTest, EmptyFilterReturnsTheNewestLiveEvents) {
  proto::filter f;
  check({f}, "{}");
  check({with_limit(f, 7)}, "{limit:7}");
  auto got = query({with_limit(f, 1000)});
  // max_limit (500) clamps; the corpus is smaller, so everything live.
  EXPECT_EQ(got.size(), data_->events.size() - data_->deleted.size());
}

TEST_F(QueryTest, ByIds) {
  proto::filter f;
  f.ids = std::vector<std::string>{data_->events[3].id, data_->events[10].id, std::string(64, 'f'),
                                   "zz"};
  check({f}, "ids");
  proto::filter deleted;
  deleted.ids = std::vector<std::string>(data_->deleted.begin(), data_->deleted.end());
  EXPECT_TRUE(query({deleted}).empty()) << "deleted events are never returned";
  EXPECT_EQ(db::count_events(conn(), data_->community_id, {deleted}, wall_now()), 0u);
}

TEST_F(QueryTest, ByAuthors) {
  proto::filter one;
  one.authors = std::vector<std::string>{pk(2)};
  check({one}, "authors:[2]");
  check({with_limit(one, 3)}, "authors:[2] limit 3");
  proto::filter several;
  several.authors = std::vector<std::string>{pk(1), pk(3), pk(4)};
  check({with_limit(several, 10)}, "authors:[1,3,4] limit 10");
  proto::filter with_kinds = several;
  with_kinds.kinds = std::vector<int32_t>{7, 9};
  check({with_limit(with_kinds, 5)}, "authors + kinds");
}

TEST_F(QueryTest, ByKinds) {
  proto::filter f;
  f.kinds = std::vector<int32_t>{9};
  check({f}, "kinds:[9]");
  f.kinds = std::vector<int32_t>{1, 0, 30023};
  check({with_limit(f, 4)}, "kinds:[1,0,30023] limit 4");
  f.kinds = std::vector<int32_t>{0};
  auto got = query({f});
  ASSERT_EQ(got.size(), 1u);
  EXPECT_NE(got[0].find("profile new"), std::string::npos);
}

TEST_F(QueryTest, BySinceAndUntil) {
  proto::filter f;
  f.since = 1010;
  check({f}, "since");
  f.until = 1020;
  check({f}, "since+until");
  f.since = 1020;
  f.until = 1020;
  check({f}, "since=until");
  proto::filter until_only;
  until_only.until = 995;
  check({until_only}, "until");
}

TEST_F(QueryTest, ByTags) {
  proto::filter h;
  h.tags['g'] = {"room1"};
  check({h}, "#g:[room1]");
  check({with_limit(h, 5)}, "#g:[room1] limit 5");
  proto::filter h2;
  h2.tags['g'] = {"room0", "room2"};
  check({h2}, "#g:[room0,room2] (events with both appear once)");
  check({with_limit(h2, 9)}, "#g two values limit 9");
  proto::filter kh;
  kh.kinds = std::vector<int32_t>{9};
  kh.tags['g'] = {"room3"};
  check({with_limit(kh, 50)}, "{kinds:[9], #g:[room3], limit:50}");
  proto::filter hp;
  hp.tags['g'] = {"room0", "room1", "room2"};
  hp.tags['p'] = {pk(1), pk(2)};
  check({hp}, "#g and #p");
  proto::filter hpt = hp;
  hpt.tags['t'] = {"topic0", "topic1", "topic2"};
  hpt.authors = std::vector<std::string>{pk(1), pk(2), pk(3), pk(4), pk(5)};
  hpt.since = 1005;
  check({hpt}, "three tags, authors, since");
  proto::filter e;
  for (const auto& ev : data_->events)
    for (const auto& t : ev.tags)
      if (t[0] == "e" && e.tags['e'].size() < 3)
        e.tags['e'].push_back(t[1]);
  ASSERT_FALSE(e.tags['e'].empty());
  check({e}, "#e");
}

TEST_F(QueryTest, LongTagValuesAreNotIndexed) {
  proto::filter f;
  f.tags['t'] = {std::string(300, 'L')};
  EXPECT_TRUE(query({f}).empty());
  EXPECT_EQ(db::count_events(conn(), data_->community_id, {f}, wall_now()), 0u);
}

TEST_F(QueryTest, OrderingIsNewestFirstTiesByIdAscending) {
  proto::filter f;
  f.limit = 500;
  auto got = query({f});
  ASSERT_GT(got.size(), 50u);
  std::map<std::string, const proto::event*> by_raw;
  for (const auto& ev : data_->events)
    by_raw[ev.raw] = &ev;
  int ties = 0;
  for (size_t i = 1; i < got.size(); ++i) {
    auto* a = by_raw.at(got[i - 1]);
    auto* b = by_raw.at(got[i]);
    ASSERT_GE(a->created_at, b->created_at);
    if (a->created_at == b->created_at) {
      ++ties;
      EXPECT_LT(a->id, b->id);
    }
  }
  EXPECT_GT(ties, 10) << "the corpus should exercise ties";
}

TEST_F(QueryTest, SeveralFiltersAreOrEdDedupedAndCappedAtTheSumOfLimits) {
  proto::filter a;
  a.kinds = std::vector<int32_t>{9};
  a.limit = 10;
  proto::filter b;
  b.authors = std::vector<std::string>{pk(3)};
  b.limit = 10;
  proto::filter c;
  c.tags['g'] = {"room2"};
  c.limit = 5;
  check({a, b, c}, "three filters");
  auto got = query({a, b, c});
  std::set<std::string> unique(got.begin(), got.end());
  EXPECT_EQ(unique.size(), got.size());
  EXPECT_LE(got.size(), 25u);
  // The same filter twice: deduplicated.
  auto twice = query({a, a});
  EXPECT_EQ(twice, query({a}));
}

TEST_F(QueryTest, MatchesNothingFiltersAreSkipped) {
  proto::filter none_kinds;
  none_kinds.kinds = std::vector<int32_t>{};
  proto::filter none_ids;
  none_ids.ids = std::vector<std::string>{};
  proto::filter none_tag;
  none_tag.tags['g'] = {};
  proto::filter inverted;
  inverted.since = 2000;
  inverted.until = 1000;
  proto::filter zero;
  zero.limit = 0;
  for (const auto& f : {none_kinds, none_ids, none_tag, inverted, zero})
    EXPECT_TRUE(query({f}).empty()) << proto::to_json(f);
  EXPECT_EQ(db::count_events(conn(), data_->community_id, {none_kinds, none_ids, none_tag, inverted}, wall_now()), 0u);
  proto::filter some;
  some.kinds = std::vector<int32_t>{7};
  some.limit = 3;
  EXPECT_EQ(query({none_kinds, some, inverted}), query({some}));
  EXPECT_TRUE(query({}).empty());
}

TEST_F(QueryTest, CountIgnoresLimits) {
  proto::filter f;
  f.kinds = std::vector<int32_t>{1, 7, 9};
  f.limit = 1;
  EXPECT_EQ(db::count_events(conn(), data_->community_id, {f}, wall_now()), expected_count({f}));
  EXPECT_GT(expected_count({f}), 50u);
  proto::filter g;
  g.tags['g'] = {"room0", "room1"};
  proto::filter h;
  h.authors = std::vector<std::string>{pk(1)};
  EXPECT_EQ(db::count_events(conn(), data_->community_id, {g, h}, wall_now()), expected_count({g, h}));
  EXPECT_EQ(db::count_events(conn(), data_->community_id, {}, wall_now()), 0u);
}

TEST_F(QueryTest, ClientStringsAreParametersNotSql) {
  proto::filter f;
  f.tags['g'] = {"room1' OR '1'='1", "{\"a\",\"b\"}", "back\\slash", "NULL", "} , {"};
  f.authors = std::vector<std::string>{"'); DROP TABLE events; --"};
  EXPECT_TRUE(query({f}).empty());
  proto::filter g;
  g.tags['g'] = {"room1' OR '1'='1", "NULL"};
  EXPECT_TRUE(query({g}).empty());
  EXPECT_EQ(db::count_events(conn(), data_->community_id, {g}, wall_now()), 0u);
}

// Random filters against the oracle (deterministic seed).
TEST_F(QueryTest, RandomFiltersAgreeWithTheMatcher) {
  std::mt19937 rng(7);
  for (int round = 0; round < 150; ++round) {
    std::vector<proto::filter> fs(1 + rng() % 3);
    for (auto& f : fs) {
      if (rng() % 3 == 0) {
        std::vector<std::string> a;
        for (int i = 0, n = 1 + static_cast<int>(rng() % 3); i < n; ++i)
          a.push_back(pk(1 + static_cast<int>(rng() % 6)));
        f.authors = a;
      }
      if (rng() % 2 == 0) {
        std::vector<int32_t> k;
        for (int i = 0, n = 1 + static_cast<int>(rng() % 2); i < n; ++i)
          k.push_back(std::array<int32_t, 5>{1, 7, 9, 0, 5}[rng() % 5]);
        f.kinds = k;
      }
      if (rng() % 2 == 0) {
        for (int i = 0, n = 1 + static_cast<int>(rng() % 2); i < n; ++i)
          f.tags['g'].push_back("room" + std::to_string(rng() % 5));
      }
      if (rng() % 4 == 0)
        f.tags['p'] = {pk(1 + static_cast<int>(rng() % 5))};
      if (rng() % 4 == 0)
        f.since = 1000 + static_cast<int64_t>(rng() % 40);
      if (rng() % 4 == 0)
        f.until = 1000 + static_cast<int64_t>(rng() % 40);
      if (rng() % 2 == 0)
        f.limit = 1 + static_cast<uint32_t>(rng() % 20);
      if (rng() % 8 == 0) {
        std::vector<std::string> ids;
        for (int i = 0; i < 5; ++i)
          ids.push_back(data_->events[rng() % data_->events.size()].id);
        f.ids = ids;
      }
    }
    std::string label = "round " + std::to_string(round) + ":";
    for (const auto& f : fs) {
      label += ' ';
      label += proto::to_json(f);
    }
    check(fs, label);
    if (HasFailure())
      break;
  }
}

TEST_F(QueryTest, OtherCommunitiesAreInvisible) {
  proto::filter f;
  f.tags['g'] = {"room0"};
  f.limit = 500;
  for (const auto& raw : query({f}))
    EXPECT_EQ(raw.find("noise"), std::string::npos);
  auto other = db::query_events(conn(), data_->other_community_id, {f}, proto::filter_limits{}, wall_now());
  EXPECT_EQ(other.size(), 20u);
  for (const auto& raw : other)
    EXPECT_NE(raw.find("noise"), std::string::npos);
  EXPECT_EQ(db::count_events(conn(), data_->other_community_id, {proto::filter{}}, wall_now()), 20u);
}

}  // namespace
}  // namespace waggle::pgtest
