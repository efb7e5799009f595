#include "messages/proto/filter.hpp"

#include <gtest/gtest.h>

#include <string>

using namespace waggle;
using namespace waggle::proto;

namespace {

const std::string A(64, 'a');
const std::string B(64, 'b');
const std::string C(64, 'c');

filter ok(std::string_view json, const filter_limits& lim = {}) {
  auto r = parse_filter(json, lim);
  EXPECT_TRUE(r.has_value()) << json << ": " << (r.has_value() ? "" : r.error().reason);
  return r.has_value() ? *r : filter{};
}

void bad(std::string_view json, std::string_view reason_part, const filter_limits& lim = {}) {
  auto r = parse_filter(json, lim);
  ASSERT_FALSE(r.has_value()) << "accepted: " << json;
  EXPECT_EQ(r.error().code, ec::invalid);
  EXPECT_NE(r.error().reason.find(reason_part), std::string::npos)
      << "reason '" << r.error().reason << "' lacks '" << reason_part << "'";
}

std::string list_of(size_t n, const std::string& item) {
  std::string s = "[";
  for (size_t i = 0; i < n; ++i) {
    if (i)
      s += ',';
    s += item;
  }
  return s + "]";
}

event make_event(std::string id, std::string pubkey, int32_t kind, int64_t created_at,
                 std::vector<tag> tags = {}) {
  event ev;
  ev.id = std::move(id);
  ev.pubkey = std::move(pubkey);
  ev.kind = kind;
  ev.created_at = created_at;
  ev.tags = std::move(tags);
  return ev;
}

}  // namespace

// ---------------------------------------------------------------------------
// Parsing

TEST(FilterParse, Empty) {
  filter f = ok("{}");
  EXPECT_EQ(f, filter{});
  EXPECT_FALSE(f.ids);
  EXPECT_FALSE(f.authors);
  EXPECT_FALSE(f.kinds);
  EXPECT_FALSE(f.matches_nothing());
  EXPECT_EQ(f.effective_limit({}), 100u);
}

TEST(FilterParse, AllFields) {
  filter f = ok(R"({"ids":[")" + A + R"("],"authors":[")" + B + R"(",")" + C +
                R"("],"kinds":[1,7,30023],"#e":["x","y"],"#P":["z"],"since":10,"until":20,"limit":5})");
  ASSERT_TRUE(f.ids);
  EXPECT_EQ(*f.ids, std::vector<std::string>{A});
  ASSERT_TRUE(f.authors);
  EXPECT_EQ(*f.authors, (std::vector<std::string>{B, C}));
  ASSERT_TRUE(f.kinds);
  EXPECT_EQ(*f.kinds, (std::vector<int32_t>{1, 7, 30023}));
  EXPECT_EQ(f.tags.at('e'), (std::vector<std::string>{"x", "y"}));
  EXPECT_EQ(f.tags.at('P'), (std::vector<std::string>{"z"}));
  EXPECT_EQ(f.since, 10);
  EXPECT_EQ(f.until, 20);
  EXPECT_EQ(f.limit, 5u);
  EXPECT_EQ(f.effective_limit({}), 5u);
}

TEST(FilterParse, EmptyListsArePresent) {
  filter f = ok(R"({"ids":[],"authors":[],"kinds":[],"#t":[]})");
  ASSERT_TRUE(f.ids);
  EXPECT_TRUE(f.ids->empty());
  ASSERT_TRUE(f.authors);
  EXPECT_TRUE(f.authors->empty());
  ASSERT_TRUE(f.kinds);
  EXPECT_TRUE(f.kinds->empty());
  ASSERT_EQ(f.tags.count('t'), 1u);
  EXPECT_TRUE(f.matches_nothing());
}

TEST(FilterParse, LimitClampedNotRejected) {
  filter_limits lim;
  lim.max_limit = 500;
  EXPECT_EQ(ok(R"({"limit":501})", lim).limit, 500u);
  EXPECT_EQ(ok(R"({"limit":18446744073709551615})", lim).limit, 500u);
  EXPECT_EQ(ok(R"({"limit":4294967296})", lim).limit, 500u);
  EXPECT_EQ(ok(R"({"limit":500})", lim).limit, 500u);
  EXPECT_EQ(ok(R"({"limit":0})", lim).limit, 0u);
  EXPECT_EQ(ok(R"({"limit":0})", lim).effective_limit(lim), 0u);
}

TEST(FilterParse, ValuesUpToTheLimitsAreAccepted) {
  filter_limits lim;
  lim.max_values = 3;
  lim.max_tag_value_len = 4;
  filter f = ok(R"({"kinds":[1,2,3],"#t":["abcd","",""]})", lim);
  EXPECT_EQ(f.kinds->size(), 3u);
  EXPECT_EQ(f.tags.at('t')[0], "abcd");
}

TEST(FilterParse, Rejections) {
  bad("[]", "filter must be a JSON object");
  bad("1", "filter must be a JSON object");
  bad("{", "not valid JSON");
  bad(R"({"foo":1})", "unsupported filter field: foo");
  bad(R"({"#":["x"]})", "unsupported filter field: #");
  bad(R"({"#ab":["x"]})", "unsupported filter field: #ab");
  bad(R"({"#1":["x"]})", "unsupported filter field: #1");
  bad(R"({"#é":["x"]})", "unsupported filter field");
  bad(R"({"ids":")" + A + R"("})", "ids must be an array");
  bad(R"({"ids":[1]})", "ids must contain strings");
  bad(R"({"ids":["abcd"]})", "prefixes are not supported");
  bad(R"({"ids":[")" + A + R"(0"]})", "ids must be 64-character lowercase hex");
  bad(R"({"ids":[")" + std::string(64, 'A') + R"("]})", "ids must be 64-character lowercase hex");
  bad(R"({"authors":["abcd"]})", "authors must be 64-character lowercase hex");
  bad(R"({"authors":[")" + std::string(63, 'a') + R"(g"]})", "authors must be 64");
  bad(R"({"authors":null})", "authors must be an array");
  bad(R"({"kinds":1})", "kinds must be an array");
  bad(R"({"kinds":[65536]})", "kinds must be integers between 0 and 65535");
  bad(R"({"kinds":[-1]})", "kinds must be integers");
  bad(R"({"kinds":[1.5]})", "kinds must be integers");
  bad(R"({"kinds":["1"]})", "kinds must be integers");
  bad(R"({"since":-1})", "since must be a non-negative integer");
  bad(R"({"since":1.5})", "since must be a non-negative integer");
  bad(R"({"since":"1"})", "since must be a non-negative integer");
  bad(R"({"since":9223372036854775808})", "since must be a non-negative integer");
  bad(R"({"until":-5})", "until must be a non-negative integer");
  bad(R"({"until":null})", "until must be a non-negative integer");
  bad(R"({"limit":-1})", "limit must be a non-negative integer");
  bad(R"({"limit":10.5})", "limit must be a non-negative integer");
  bad(R"({"limit":1e3})", "limit must be a non-negative integer");
  bad(R"({"limit":"10"})", "limit must be a non-negative integer");
  bad(R"({"#e":"x"})", "#e must be an array");
  bad(R"({"#e":[1]})", "#e must contain strings");
  bad(R"({"#e":["\udc00"]})", "UTF-8");
  bad(R"({"kinds":[1],"kinds":[2]})", "duplicate filter field: kinds");
  bad(R"({"#e":["a"],"#e":["b"]})", "duplicate filter field: #e");
  bad(R"({"limit":1,"limit":2})", "duplicate filter field: limit");
}

TEST(FilterParse, UnknownKeyIsEchoedSafely) {
  auto r = parse_filter("{\"" + std::string(500, 'k') + "\":1}", {});
  ASSERT_FALSE(r.has_value());
  EXPECT_LT(r.error().reason.size(), 120u);
  r = parse_filter(R"({"a\nb":1})", {});
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().reason, "unsupported filter field: a?b");
}

TEST(FilterParse, TooManyValues) {
  filter_limits lim;
  lim.max_values = 500;
  const std::string hex = "\"" + A + "\"";
  EXPECT_EQ(ok(R"({"ids":)" + list_of(500, hex) + "}", lim).ids->size(), 500u);
  bad(R"({"ids":)" + list_of(501, hex) + "}", "too many values in ids", lim);
  bad(R"({"authors":)" + list_of(501, hex) + "}", "too many values in authors", lim);
  bad(R"({"kinds":)" + list_of(501, "1") + "}", "too many values in kinds", lim);
  bad(R"({"#p":)" + list_of(501, "\"x\"") + "}", "too many values in #p", lim);
  bad(R"({"#p":)" + list_of(5000, "\"x\"") + "}", "too many values in #p", lim);
}

TEST(FilterParse, TagValueTooLong) {
  filter_limits lim;
  lim.max_tag_value_len = 256;
  ok(R"({"#d":[")" + std::string(256, 'x') + R"("]})", lim);
  bad(R"({"#d":[")" + std::string(257, 'x') + R"("]})", "tag value too long in #d", lim);
}

// ---------------------------------------------------------------------------
// Matching

TEST(FilterMatch, EmptyFilterMatchesEverything) {
  EXPECT_TRUE(matches(filter{}, make_event(A, B, 1, 0)));
  EXPECT_TRUE(matches(filter{}, make_event(C, C, 65535, INT64_MAX)));
}

TEST(FilterMatch, Ids) {
  filter f = ok(R"({"ids":[")" + A + R"(",")" + B + R"("]})");
  EXPECT_TRUE(matches(f, make_event(A, C, 1, 1)));
  EXPECT_TRUE(matches(f, make_event(B, C, 1, 1)));
  EXPECT_FALSE(matches(f, make_event(C, C, 1, 1)));
}

TEST(FilterMatch, Authors) {
  filter f = ok(R"({"authors":[")" + B + R"("]})");
  EXPECT_TRUE(matches(f, make_event(A, B, 1, 1)));
  EXPECT_FALSE(matches(f, make_event(B, A, 1, 1)));  // the id is not the author
}

TEST(FilterMatch, Kinds) {
  filter f = ok(R"({"kinds":[0,7]})");
  EXPECT_TRUE(matches(f, make_event(A, B, 0, 1)));
  EXPECT_TRUE(matches(f, make_event(A, B, 7, 1)));
  EXPECT_FALSE(matches(f, make_event(A, B, 1, 1)));
}

TEST(FilterMatch, SinceUntilInclusive) {
  filter f = ok(R"({"since":100,"until":200})");
  EXPECT_FALSE(matches(f, make_event(A, B, 1, 99)));
  EXPECT_TRUE(matches(f, make_event(A, B, 1, 100)));
  EXPECT_TRUE(matches(f, make_event(A, B, 1, 150)));
  EXPECT_TRUE(matches(f, make_event(A, B, 1, 200)));
  EXPECT_FALSE(matches(f, make_event(A, B, 1, 201)));
  filter same = ok(R"({"since":100,"until":100})");
  EXPECT_TRUE(matches(same, make_event(A, B, 1, 100)));
  EXPECT_FALSE(same.matches_nothing());
  filter inverted = ok(R"({"since":101,"until":100})");
  EXPECT_TRUE(inverted.matches_nothing());
}

TEST(FilterMatch, Tags) {
  filter f = ok(R"({"#e":["x","y"]})");
  EXPECT_TRUE(matches(f, make_event(A, B, 1, 1, {{"e", "x"}})));
  EXPECT_TRUE(matches(f, make_event(A, B, 1, 1, {{"p", "x"}, {"e", "q"}, {"e", "y", "relay"}})));
  EXPECT_FALSE(matches(f, make_event(A, B, 1, 1)));
  EXPECT_FALSE(matches(f, make_event(A, B, 1, 1, {{"p", "x"}})));        // other tag name
  EXPECT_FALSE(matches(f, make_event(A, B, 1, 1, {{"E", "x"}})));        // case-sensitive
  EXPECT_FALSE(matches(f, make_event(A, B, 1, 1, {{"e"}})));             // no value
  EXPECT_FALSE(matches(f, make_event(A, B, 1, 1, {{"e", "q", "x"}})));   // only the first value
  EXPECT_FALSE(matches(f, make_event(A, B, 1, 1, {{"ee", "x"}})));       // multi-letter name
  EXPECT_FALSE(matches(f, make_event(A, B, 1, 1, {{"e", "X"}})));        // exact values

  // Two tag conditions are AND-ed.
  filter two = ok(R"({"#e":["x"],"#p":["y"]})");
  EXPECT_FALSE(matches(two, make_event(A, B, 1, 1, {{"e", "x"}})));
  EXPECT_TRUE(matches(two, make_event(A, B, 1, 1, {{"e", "x"}, {"p", "y"}})));
}

TEST(FilterMatch, AllConditionsAnded) {
  filter f = ok(R"({"authors":[")" + B + R"("],"kinds":[1],"#t":["bees"],"since":10})");
  const event good = make_event(A, B, 1, 10, {{"t", "bees"}});
  EXPECT_TRUE(matches(f, good));
  event e = good;
  e.pubkey = C;
  EXPECT_FALSE(matches(f, e));
  e = good;
  e.kind = 2;
  EXPECT_FALSE(matches(f, e));
  e = good;
  e.tags = {{"t", "wasps"}};
  EXPECT_FALSE(matches(f, e));
  e = good;
  e.created_at = 9;
  EXPECT_FALSE(matches(f, e));
}

TEST(FilterMatch, EmptyListsMatchNothing) {
  const event ev = make_event(A, B, 1, 1, {{"t", "x"}});
  for (const char* json : {R"({"ids":[]})", R"({"authors":[]})", R"({"kinds":[]})", R"({"#t":[]})"}) {
    filter f = ok(json);
    EXPECT_TRUE(f.matches_nothing()) << json;
    EXPECT_FALSE(matches(f, ev)) << json;
  }
  filter f;
  f.ids.emplace();
  EXPECT_TRUE(f.matches_nothing());
  EXPECT_FALSE(matches(f, ev));
}

TEST(FilterMatch, LimitDoesNotAffectMatching) {
  filter f = ok(R"({"limit":0})");
  EXPECT_FALSE(f.matches_nothing());  // limit 0: no history, but live events still match
  EXPECT_TRUE(matches(f, make_event(A, B, 1, 1)));
}

TEST(FilterMatch, MatchesAny) {
  const event ev = make_event(A, B, 1, 1);
  EXPECT_FALSE(matches_any({}, ev));
  EXPECT_FALSE(matches_any({ok(R"({"kinds":[2]})"), ok(R"({"authors":[")" + C + R"("]})")}, ev));
  EXPECT_TRUE(matches_any({ok(R"({"kinds":[2]})"), ok(R"({"authors":[")" + B + R"("]})")}, ev));
  EXPECT_TRUE(matches_any({ok(R"({"kinds":[]})"), ok("{}")}, ev));
}

// ---------------------------------------------------------------------------
// to_json

TEST(FilterJson, CanonicalOrderAndRoundTrip) {
  filter f = ok(R"({"limit":5,"#p":["z"],"until":20,"#e":["x\"y"],"kinds":[1],"since":10,"authors":[")" +
                B + R"("],"ids":[")" + A + R"("]})");
  const std::string json = to_json(f);
  EXPECT_EQ(json, R"({"ids":[")" + A + R"("],"authors":[")" + B +
                      R"("],"kinds":[1],"#e":["x\"y"],"#p":["z"],"since":10,"until":20,"limit":5})");
  EXPECT_EQ(ok(json), f);
  EXPECT_EQ(to_json(filter{}), "{}");
  EXPECT_EQ(to_json(ok(R"({"ids":[],"kinds":[]})")), R"({"ids":[],"kinds":[]})");
}

// ---------------------------------------------------------------------------
// NIP-50 search (docs/search.md)

TEST(FilterSearch, ParsedKeptAsSentAndRoundTrips) {
  filter f = ok(R"({"kinds":[9],"search":"  bees \"hive  mind\" include:spam "})");
  ASSERT_TRUE(f.search);
  EXPECT_EQ(*f.search, "  bees \"hive  mind\" include:spam ");
  EXPECT_EQ(to_json(f), R"({"kinds":[9],"search":"  bees \"hive  mind\" include:spam "})");
  EXPECT_EQ(ok(to_json(f)), f);
  // NUL travels escaped, as every string of a filter does.
  filter nul = ok(R"({"search":"a\u0000b"})");
  EXPECT_EQ(*nul.search, std::string("a\0b", 3));
  EXPECT_EQ(ok(to_json(nul)), nul);
}

TEST(FilterSearch, Rejections) {
  bad(R"({"search":1})", "search must be a string");
  bad(R"({"search":["bees"]})", "search must be a string");
  bad(R"({"search":"a","search":"b"})", "duplicate filter field: search");
  bad(R"({"search":"\udc00"})", "search must be valid UTF-8");
  filter_limits lim;
  lim.max_search_len = 8;
  ok(R"({"search":"12345678"})", lim);
  bad(R"({"search":"123456789"})", "search too long (max 8 bytes)", lim);
  bad("{\"search\":\"" + std::string(10240, 'x') + "\"}", "search too long (max 1024 bytes)");
  lim.search = false;
  bad(R"({"search":"bees"})", "search is off on this relay", lim);
  ok(R"({"kinds":[1]})", lim);  // everything else still parses
}

TEST(FilterSearch, TermsDropNip50ExtensionsAndControlCharacters) {
  EXPECT_EQ(search_terms("  bees   and\thoney \n"), "bees and honey");
  EXPECT_EQ(search_terms("bees include:spam language:en domain:x.org sentiment:negative nsfw:false"),
            "bees");
  // Other key:value text is words (team chat, not extensions).
  EXPECT_EQ(search_terms("TODO:fix file.cpp:42 10:30 http://x.org include:"),
            "TODO:fix file.cpp:42 10:30 http://x.org include:");
  EXPECT_EQ(search_terms(std::string("a\0b", 3)), "a b");
  EXPECT_EQ(search_terms("\"hive   mind\""), "\"hive mind\"");
  EXPECT_EQ(search_terms(" \t\n"), "");
  EXPECT_EQ(search_terms("include:spam"), "");
}

TEST(FilterSearch, EmptyTermsMatchNothing) {
  EXPECT_TRUE(ok(R"({"search":""})").matches_nothing());
  EXPECT_TRUE(ok(R"({"search":" \t "})").matches_nothing());
  EXPECT_TRUE(ok(R"({"search":"nsfw:true"})").matches_nothing());
  EXPECT_FALSE(ok(R"({"search":"bees"})").matches_nothing());
}

// One-shot: a search filter is history only, so the live path never
// delivers to it, even for an event that has every word.
TEST(FilterSearch, NeverMatchesALiveEvent) {
  event ev = make_event(A, B, 1, 10);
  ev.content = "bees";
  EXPECT_TRUE(matches(ok("{}"), ev));
  EXPECT_FALSE(matches(ok(R"({"search":"bees"})"), ev));
  EXPECT_FALSE(matches(ok(R"({"kinds":[1],"search":"bees"})"), ev));
  EXPECT_FALSE(matches_any({ok(R"({"search":"bees"})")}, ev));
  EXPECT_TRUE(matches_any({ok(R"({"search":"bees"})"), ok(R"({"kinds":[1]})")}, ev));
}
