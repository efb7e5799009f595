// NIP-50 search (docs/search.md) behind query_events_page / count_events:
// ranking, tenant and channel scoping, the other filter fields, hostile
// search strings, one page, both write paths filling the index, the plan on
// a table of several communities, and the migration run by a plain owner.

#include <algorithm>

#include <pqxx/nontransaction>

#include "db/event_search.hpp"
#include "db/group_store.hpp"
#include "db/prepared_reads.hpp"
#include "messages/proto/filter.hpp"
#include "messages/proto/nip29.hpp"
#include "tests/db/channel_fixture.hpp"

namespace waggle::pgtest {
namespace {

namespace nip29 = proto::nip29;

class SearchTest : public PgTest {
 protected:
  static proto::filter f(const std::string& json) {
    auto r = proto::parse_filter(json, {});
    EXPECT_TRUE(r.has_value()) << json;
    return r.has_value() ? *r : proto::filter{};
  }
  static std::string id_of(const std::string& raw) { return raw.substr(7, 64); }
  static std::vector<std::string> ids(const std::vector<std::string>& raws) {
    std::vector<std::string> out;
    for (const auto& r : raws)
      out.push_back(id_of(r));
    return out;
  }
  std::vector<std::string> search(int64_t c, const std::vector<proto::filter>& fs,
                                  int64_t now = wall_now()) {
    return ids(db::query_events(conn(), c, fs, {}, now));
  }
  std::vector<std::string> search(int64_t c, const std::string& words) {
    proto::filter x;
    x.search = words;
    return search(c, std::vector<proto::filter>{x});
  }
  void store(int64_t c, const std::vector<proto::event>& evs) {
    auto r = db::write_batch(conn(), batch(c, evs));
    for (size_t i = 0; i < r.size(); ++i)
      ASSERT_EQ(r[i].outcome, write_outcome::stored) << i << " " << r[i].reason;
  }
  // events.search of a stored event: NULL -> "NULL".
  std::string vector_of(int64_t c, const std::string& id) {
    pqxx::nontransaction tx(conn());
    auto r = tx.exec_params(
      "SELECT coalesce(search::text, 'NULL') FROM events WHERE community_id = $1 AND id = decode($2, 'hex')",
      c, id);
    return r.empty() ? "(no row)" : r[0][0].as<std::string>();
  }
  void make_channel(int64_t c, const std::string& ch, int owner, bool is_private) {
    std::vector<proto::tag> tags = {{"h", ch}, {"name", ch}};
    if (is_private)
      tags.push_back({"private"});
    auto created = db::apply_group_command(conn(), c, ptr(command(owner, nip29::kind_create_group, tags)));
    ASSERT_EQ(created.result.outcome, write_outcome::stored) << created.result.reason;
  }
};

TEST_F(SearchTest, ranked_by_relevance_then_newest_first_ties_by_id) {
  auto c = community();
  auto once_old = make_event(1, 1, 1000, {}, "the bees are out");
  auto thrice = make_event(1, 1, 900, {}, "bees bees and more bees");
  auto twice = make_event(2, 1, 800, {}, "bees, bees");
  auto once_new = make_event(2, 1, 1100, {}, "bees");
  auto tie_a = make_event(3, 1, 1050, {}, "bees");
  auto tie_b = make_event(4, 1, 1050, {}, "bees");
  auto other = make_event(3, 1, 1200, {}, "wasps only");
  store(c, {once_old, thrice, twice, once_new, tie_a, tie_b, other});
  auto [first_tie, second_tie] = std::minmax(tie_a.id, tie_b.id);
  // Equal ranks: the four single mentions whose documents rank alike come
  // newest first; two at one second by id.
  auto got = search(c, "bees");
  ASSERT_EQ(got.size(), 6u);
  EXPECT_EQ(got[0], thrice.id);
  EXPECT_EQ(got[1], twice.id);
  std::vector<std::string> singles(got.begin() + 2, got.end());
  // ts_rank of one mention depends only on the match, not the document's
  // length (normalization 0): newest first, then id.
  EXPECT_EQ(singles, (std::vector<std::string>{once_new.id, first_tie, second_tie, once_old.id}));
  EXPECT_EQ(search(c, "BEES"), got);  // 'simple' lower-cases
  EXPECT_EQ(search(c, "wasps"), std::vector<std::string>{other.id});
  // The filter's limit cuts the ranked list, best first.
  EXPECT_EQ(search(c, {f(R"({"search":"bees","limit":2})")}),
            (std::vector<std::string>{thrice.id, twice.id}));
}

// Issue 34 (NIP-50 search ranked every match): a search ranks only the
// newest --search-max-ranked matches. The best-ranked event here is the
// oldest; with a cap of 3 it is not among the ranked, with no cap it is
// first. Red before the cap: every match was ranked.
TEST_F(SearchTest, a_search_ranks_only_the_newest_matches_up_to_the_cap) {
  auto c = community();
  auto best_but_oldest = make_event(1, 1, 1000, {}, "bees bees bees bees bees");
  std::vector<proto::event> evs{best_but_oldest};
  for (int i = 0; i < 5; ++i)
    evs.push_back(make_event(2, 1, 1100 + i, {}, "bees " + std::to_string(i)));
  store(c, evs);
  proto::filter x;
  x.search = "bees";
  proto::filter_limits capped;
  capped.max_search_ranked = 3;
  auto got = ids(db::query_events(conn(), c, {x}, capped, wall_now()));
  EXPECT_EQ(got, (std::vector<std::string>{evs[5].id, evs[4].id, evs[3].id}))
    << "the newest three, ranked alike, newest first";
  proto::filter_limits uncapped;
  uncapped.max_search_ranked = 0;
  auto all = ids(db::query_events(conn(), c, {x}, uncapped, wall_now()));
  ASSERT_EQ(all.size(), 6u);
  EXPECT_EQ(all.front(), best_but_oldest.id);
  // COUNT still counts every match.
  EXPECT_EQ(db::count_events(conn(), c, {x}, wall_now()), 6u);
}

TEST_F(SearchTest, a_search_returns_only_the_callers_community) {
  auto a = community("a");
  auto b = community("b");
  auto in_a = make_event(1, 1, 1000, {}, "honey harvest report");
  auto in_b = make_event(2, 1, 1001, {}, "honey harvest report");
  auto same = make_event(3, 1, 1002, {}, "honey everywhere");  // stored in both
  store(a, {in_a, same});
  store(b, {in_b, same});
  auto fa = std::vector<proto::filter>{f(R"({"search":"honey"})")};
  EXPECT_EQ(search(a, fa), (std::vector<std::string>{same.id, in_a.id}));
  EXPECT_EQ(search(b, fa), (std::vector<std::string>{same.id, in_b.id}));
  EXPECT_EQ(db::count_events(conn(), a, fa, wall_now()), 2u);
  EXPECT_EQ(db::count_events(conn(), b, {f(R"({"search":"harvest"})")}, wall_now()), 1u);
}

// The caller access-checks #h before the query (docs/channels.md,
// "Access"); the query's own rule is the history's: no #h, no channel event.
TEST_F(SearchTest, channel_events_match_only_filters_that_name_their_channel) {
  auto c = community();
  make_channel(c, "vault", 1, true);
  make_channel(c, "garden", 1, false);
  auto secret_post = post(1, "vault", "secret honey recipe");
  auto open_post = post(1, "garden", "open honey stand");
  auto plain = make_event(2, 1, fresh_time(), {}, "plain honey jar");
  store(c, {secret_post, open_post, plain});
  EXPECT_EQ(search(c, "honey"), std::vector<std::string>{plain.id});
  EXPECT_EQ(search(c, {f(R"({"search":"honey","kinds":[9]})")}), std::vector<std::string>{});
  EXPECT_EQ(db::count_events(conn(), c, {f(R"({"search":"honey"})")}, wall_now()), 1u);
  EXPECT_EQ(search(c, {f(R"({"search":"honey","#h":["vault"]})")}),
            std::vector<std::string>{secret_post.id});
  EXPECT_EQ(search(c, {f(R"({"search":"honey","#h":["garden","vault"]})")}).size(), 2u);
  EXPECT_EQ(search(c, {f(R"({"search":"secret","#h":["garden"]})")}), std::vector<std::string>{});
}

TEST_F(SearchTest, the_other_filter_fields_still_apply) {
  auto c = community();
  const int64_t now = wall_now();
  auto k1 = make_event(1, 1, 1000, {{"t", "hive"}}, "queen bee");
  auto k9 = make_event(2, 9, 1010, {}, "queen bee");
  auto later = make_event(1, 1, 1020, {}, "queen bee");
  auto expiring = make_event(3, 1, 1030, {{"expiration", std::to_string(now + 30)}}, "queen bee");
  auto doomed = make_event(3, 1, 1040, {}, "queen bee");
  auto old_profile = make_event(4, 0, 900, {}, "queen bee keeper");
  auto new_profile = make_event(4, 0, 950, {}, "drone keeper");
  store(c, {k1, k9, later, expiring, doomed, old_profile});
  store(c, {new_profile});  // replaces old_profile
  store(c, {make_event(3, 5, 1050, {{"e", doomed.id}}, "")});  // NIP-09
  auto got = [&](const std::string& json) { return search(c, {f(json)}, now); };
  auto sorted = [](std::vector<std::string> v) {
    std::sort(v.begin(), v.end());
    return v;
  };
  EXPECT_EQ(sorted(got(R"({"search":"queen"})")), sorted({k1.id, k9.id, later.id, expiring.id}));
  EXPECT_EQ(got(R"({"search":"queen","kinds":[9]})"), std::vector<std::string>{k9.id});
  EXPECT_EQ(sorted(got(R"({"search":"queen","authors":[")" + pk(1) + R"("]})")),
            sorted({k1.id, later.id}));
  EXPECT_EQ(got(R"({"search":"queen","since":1015,"until":1025})"), std::vector<std::string>{later.id});
  EXPECT_EQ(got(R"({"search":"queen","#t":["hive"]})"), std::vector<std::string>{k1.id});
  EXPECT_EQ(got(R"({"search":"queen","ids":[")" + k9.id + R"(",")" + doomed.id + R"("]})"),
            std::vector<std::string>{k9.id});
  EXPECT_EQ(got(R"({"search":"keeper"})"), std::vector<std::string>{new_profile.id});
  // NIP-40: hidden from its expiration second on, as history hides it.
  auto at_expiry = search(c, {f(R"({"search":"queen"})")}, now + 30);
  EXPECT_EQ(std::count(at_expiry.begin(), at_expiry.end(), expiring.id), 0);
  EXPECT_EQ(db::count_events(conn(), c, {f(R"({"search":"queen"})")}, now + 30), 3u);
}

// websearch_to_tsquery takes any text: operators of to_tsquery, quotes and
// SQL are words (or nothing), never an error and never SQL.
TEST_F(SearchTest, hostile_search_strings_are_clean_words_and_change_nothing) {
  auto c = community();
  auto target = make_event(1, 1, 1000, {}, "please do not drop the events table");
  auto nul = make_event(1, 1, 1001, {}, std::string("before\0after honey", 18));
  store(c, {target, nul});
  EXPECT_EQ(vector_of(c, nul.id), "'after':2 'before':1 'honey':3");
  const int64_t rows_before = all_rows(c);
  std::vector<std::string> hostile = {
    "'; drop table events; --", "a & | !", "\"unterminated", "bees:* & !(honey", "<-> <2> :A",
    "' OR 1=1 --", "$1", "\\", "''", "or", "-", "\"\"", "!!!", "(", "🐝 🍯", std::string(10240, 'x'),
    std::string("hon\0ey", 6),
  };
  std::string words;
  for (int i = 0; words.size() < 10240; ++i)
    words += "w" + std::to_string(i) + " ";
  hostile.push_back(words);
  for (const auto& s : hostile) {
    proto::filter x;
    x.search = s;
    std::vector<std::string> got;
    uint64_t n = 0;
    EXPECT_NO_THROW(got = search(c, std::vector<proto::filter>{x})) << s.substr(0, 40);
    EXPECT_NO_THROW(n = db::count_events(conn(), c, {x}, wall_now())) << s.substr(0, 40);
    EXPECT_EQ(got.size(), n) << s.substr(0, 40);
  }
  EXPECT_EQ(all_rows(c), rows_before);
  EXPECT_EQ(search(c, "'; drop table events; --"), std::vector<std::string>{target.id});
  EXPECT_EQ(search(c, std::string("after\0honey", 11)), std::vector<std::string>{nul.id});
  EXPECT_EQ(search(c, "\"unterminated"), std::vector<std::string>{});
  EXPECT_EQ(search(c, "!!!"), std::vector<std::string>{});
  EXPECT_EQ(search(c, "\"drop the events\""), std::vector<std::string>{target.id});  // a phrase
  EXPECT_EQ(search(c, "drop -honey"), std::vector<std::string>{target.id});          // NOT
  EXPECT_EQ(search(c, "honey or table").size(), 2u);                                 // OR
}

TEST_F(SearchTest, empty_and_extension_only_searches_match_nothing) {
  auto c = community();
  store(c, {make_event(1, 1, 1000, {}, "include spam language en")});
  for (std::string s : {"", "   ", "\t\n", "include:spam", "language:en nsfw:true"}) {
    EXPECT_EQ(search(c, s), std::vector<std::string>{}) << s;
    proto::filter x;
    x.search = s;
    EXPECT_EQ(db::count_events(conn(), c, {x}, wall_now()), 0u) << s;
  }
  // Unsupported extensions are ignored, the words still searched.
  EXPECT_EQ(search(c, "spam include:spam").size(), 1u);
}

TEST_F(SearchTest, a_search_read_is_one_page_and_mixing_is_ranked_hits_first) {
  auto c = community();
  auto best = make_event(1, 1, 1000, {}, "pollen pollen pollen");
  auto good = make_event(1, 1, 1001, {}, "pollen");
  auto k7_old = make_event(2, 7, 1002, {}, "pollen");
  auto k7_new = make_event(2, 7, 1003, {}, "+");
  store(c, {best, good, k7_old, k7_new});
  history_page first;
  first.rows = 1;  // a page of one row per filter, were it paged
  auto page = db::query_events_page(conn(), c, {f(R"({"search":"pollen"})")}, {}, wall_now(), first);
  EXPECT_FALSE(page.more);
  EXPECT_EQ(ids(page.raws), (std::vector<std::string>{best.id, k7_old.id, good.id}));
  // Search filters first (rank order), then the others newest first; an
  // event once, at its first place.
  auto mixed = db::query_events_page(conn(), c, {f(R"({"kinds":[7]})"), f(R"({"search":"pollen"})")},
                                     {}, wall_now(), first);
  EXPECT_FALSE(mixed.more);
  EXPECT_EQ(ids(mixed.raws), (std::vector<std::string>{best.id, k7_old.id, good.id, k7_new.id}));
  // The same through prepared statements (a reader session's way).
  db::prepared_reads prepared;
  for (int round = 0; round < 7; ++round)
    EXPECT_EQ(ids(db::query_events_page(conn(), c, {f(R"({"kinds":[7]})"), f(R"({"search":"pollen"})")},
                                        {}, wall_now(), first, nullptr, &prepared)
                    .raws),
              ids(mixed.raws));
  // COUNT: the matches of every filter, once each, whatever the limits.
  EXPECT_EQ(db::count_events(conn(), c, {f(R"({"search":"pollen","limit":1})")}, wall_now()), 3u);
  EXPECT_EQ(db::count_events(conn(), c, {f(R"({"search":"pollen"})"), f(R"({"kinds":[7]})")}, wall_now()),
            4u);
}

// Both ways an event is written fill events.search: the one-statement write
// (plain batches) and the phases (channel posts, replaceable kinds, test
// hooks, write_events in a caller's transaction).
TEST_F(SearchTest, both_write_paths_fill_the_search_vector) {
  auto c = community();
  make_channel(c, "room", 1, false);
  auto plain = make_event(1, 1, 1000, {}, "Plain Path");
  auto reaction = make_event(1, 7, 1001, {}, "+");
  auto empty = make_event(1, 1, 1002, {}, "");
  auto dm = make_event(1, 4, 1003, {}, "c2lwaGVydGV4dA==?iv=aXY=");
  store(c, {plain, reaction, empty, dm});  // all plain: one statement
  auto channel_post = post(1, "room", "phased path");
  auto profile = make_event(2, 0, 1004, {}, "{\"name\":\"Zoë\"}");
  store(c, {channel_post, profile});
  auto hooked = make_event(3, 1, 1005, {}, "hooked path");
  db::write_options with_hook;
  with_hook.before_commit = [] {};
  ASSERT_EQ(db::write_batch(conn(), batch(c, {hooked}), with_hook).at(0).outcome, write_outcome::stored);
  auto in_tx = make_event(3, 1, 1006, {}, "caller transaction");
  {
    pqxx::work w(conn());
    ASSERT_EQ(db::write_events(w, batch(c, {in_tx})).at(0).outcome, write_outcome::stored);
    w.commit();
  }
  EXPECT_EQ(vector_of(c, plain.id), "'path':2 'plain':1");
  EXPECT_EQ(vector_of(c, reaction.id), "NULL");
  EXPECT_EQ(vector_of(c, empty.id), "NULL");
  EXPECT_EQ(vector_of(c, dm.id), "NULL");
  EXPECT_EQ(vector_of(c, channel_post.id), "'path':2 'phased':1");
  EXPECT_EQ(vector_of(c, profile.id), "'name':1 'zoë':2");
  EXPECT_EQ(vector_of(c, hooked.id), "'hooked':1 'path':2");
  EXPECT_EQ(vector_of(c, in_tx.id), "'caller':1 'transaction':2");
  EXPECT_EQ(search(c, "zoë"), std::vector<std::string>{profile.id});
  EXPECT_EQ(search(c, "path").size(), 2u);  // the channel post needs #h
}

TEST(SearchText, IsBoundedValidUtf8WithoutNul) {
  proto::event ev;
  ev.kind = 1;
  ev.content = std::string("a\0b \xff\xfe ok", 9);
  EXPECT_EQ(*db::search_text(ev), std::string("a b    ok"));
  ev.content = std::string(db::max_search_text - 1, 'x') + "é";  // the 2-byte char does not fit
  EXPECT_EQ(db::search_text(ev)->size(), db::max_search_text - 1);
  ev.content = " \n\t ";
  EXPECT_FALSE(db::search_text(ev));
  ev.content = "words";
  ev.kind = 1059;
  EXPECT_FALSE(db::search_text(ev));
  ev.kind = 30350;
  EXPECT_FALSE(db::search_text(ev));
}

// The search statement reads the community's own part of the GIN index
// (community_id and the tsquery both index conditions), custom and generic
// plans alike, on a table where several communities share the words.
TEST(SearchPlan, the_search_statement_uses_the_community_scoped_gin_index) {
  scratch_database sdb("search_plan");
  auto conn = sdb.connect();
  ASSERT_TRUE(db::apply_migrations(*conn, db::embedded_migrations()).has_value());
  std::vector<int64_t> cs;
  for (int i = 0; i < 4; ++i) {
    auto r = db::add_community(*conn, "plan" + std::to_string(i) + ".test", "p", community_policy::open);
    ASSERT_TRUE(r.has_value());
    cs.push_back(r->id);
  }
  {
    pqxx::nontransaction tx(*conn);
    // 4 x 20,000 rows; each word of w0..w499 in 40 rows of every community.
    tx.exec(
      "INSERT INTO events (community_id, id, pubkey, created_at, kind, raw, search) "
      "SELECT c.id, sha256((c.id || '-' || i)::text::bytea), sha256('pk'::bytea), 1700000000 + i, 1, "
      "       '{\"n\":' || i || '}', to_tsvector('simple', 'chat w' || i % 500 || ' x' || i % 7) "
      "  FROM communities c CROSS JOIN generate_series(1, 20000) AS i");
    tx.exec("VACUUM ANALYZE events");
  }
  notice_collector notices(*conn);
  {
    pqxx::nontransaction tx(*conn);
    tx.exec("LOAD 'auto_explain'");
    tx.exec("SET auto_explain.log_min_duration = 0");
    tx.exec("SET auto_explain.log_level = 'notice'");
    tx.exec("SET client_min_messages = 'notice'");
  }
  proto::filter x;
  x.search = "w42";
  auto raws = db::query_events(*conn, cs[2], {x}, {}, wall_now());
  EXPECT_EQ(raws.size(), 40u);
  auto custom = notices.text();
  EXPECT_NE(custom.find("Bitmap Index Scan on events_live_search"), std::string::npos) << custom;
  EXPECT_NE(custom.find("Index Cond: ((community_id = '" + std::to_string(cs[2]) + "'::bigint) AND (search @@ '''w42'''::tsquery))"),
            std::string::npos)
    << custom;
  EXPECT_EQ(db::count_events(*conn, cs[2], {x}, wall_now()), 40u);
  // A reader session keeps generic plans of its statements, but a search is
  // planned with its words even there (how common they are decides the plan).
  {
    pqxx::nontransaction tx(*conn);
    tx.exec("SET plan_cache_mode = force_generic_plan");
  }
  db::prepared_reads prepared;
  auto before = notices.text().size();
  EXPECT_EQ(db::query_events_page(*conn, cs[1], {x}, {}, wall_now(), {}, nullptr, &prepared).raws.size(), 40u);
  auto in_session = notices.text().substr(before);
  EXPECT_NE(in_session.find("Bitmap Index Scan on events_live_search"), std::string::npos) << in_session;
  EXPECT_NE(in_session.find("(search @@ '''w42'''::tsquery)"), std::string::npos) << in_session;
  // The commonest word (in every row): the newest rows by the created_at
  // index, stopping at the cap, not a fetch and sort of all 20,000 matches.
  x.search = "chat";
  before = notices.text().size();
  EXPECT_EQ(db::query_events_page(*conn, cs[1], {x}, {}, wall_now(), {}, nullptr, &prepared).raws.size(), 100u);
  auto common = notices.text().substr(before);
  EXPECT_NE(common.find("Index Scan using events_live_created"), std::string::npos) << common;
  EXPECT_EQ(common.find("Bitmap Index Scan on events_live_search"), std::string::npos) << common;
}

// btree_gin is a trusted extension: the owner of the database, no
// superuser, applies every migration (the relay's own role in production).
TEST(SearchMigration, a_database_owner_without_superuser_applies_it) {
  const std::string role = "waggle_search_owner_" + std::to_string(::getpid());
  const std::string dbname = role + "_db";
  pqxx::connection admin(admin_url());
  {
    pqxx::nontransaction tx(admin);
    tx.exec("DROP DATABASE IF EXISTS " + dbname + " WITH (FORCE)");
    tx.exec("DROP ROLE IF EXISTS " + role);
    tx.exec("CREATE ROLE " + role + " LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE");
    tx.exec("CREATE DATABASE " + dbname + " OWNER " + role + " TEMPLATE template0 ENCODING 'UTF8'");
  }
  std::string url = url_with_database(admin_url(), dbname);
  auto at = url.find("postgres@");
  ASSERT_NE(at, std::string::npos) << "the test expects a URL of user postgres: " << url;
  url.replace(at, 8, role);
  std::string outcome;
  {
    pqxx::connection owner(url);
    auto applied = db::apply_migrations(owner, db::embedded_migrations());
    outcome = applied ? "ok" : applied.error().reason;
    pqxx::nontransaction tx(owner);
    EXPECT_FALSE(tx.exec("SELECT rolsuper FROM pg_roles WHERE rolname = current_user")[0][0].as<bool>());
    EXPECT_EQ(tx.exec("SELECT count(*) FROM pg_extension WHERE extname = 'btree_gin'")[0][0].as<int>(), 1);
  }
  {
    pqxx::nontransaction tx(admin);
    tx.exec("DROP DATABASE " + dbname + " WITH (FORCE)");
    tx.exec("DROP ROLE " + role);
  }
  EXPECT_EQ(outcome, "ok");
}

}  // namespace
}  // namespace waggle::pgtest
