#include "messages/proto/event.hpp"

#include <gtest/gtest.h>

#include <cctype>
#include <cstdint>
#include <cstring>
#include <string>

using namespace waggle;
using namespace waggle::proto;
using namespace std::string_literals;

namespace {

// Secret key 3 (BIP-340 vector 0) and its x-only public key.
constexpr std::string_view sk3 = "0000000000000000000000000000000000000000000000000000000000000003";
constexpr std::string_view pk3 = "f9308a019258c31049344f85f89d5229b531c845836f99b08601f113bce036f9";
// BIP-340 vector 1.
constexpr std::string_view sk1 = "b7e151628aed2a6abf7158809cf4f3c762e7160f38b4da56a784d9045190cfef";
constexpr std::string_view pk1 = "dff1d77f2a671c5f36183726db2341be58feae1da2deced843240f7b502ba659";

event unsigned_event(std::string content = "hello", std::vector<tag> tags = {}) {
  event ev;
  ev.created_at = 1700000000;
  ev.kind = 1;
  ev.tags = std::move(tags);
  ev.content = std::move(content);
  return ev;
}

event signed_event(std::string content = "hello", std::vector<tag> tags = {}) {
  event ev = unsigned_event(std::move(content), std::move(tags));
  sign(ev, sk1);
  return ev;
}

std::string canonical_content(std::string content) {
  event ev;
  ev.pubkey = std::string(pk3);
  ev.content = std::move(content);
  std::string c = canonical_serialization(ev);
  // [0,"<64>",0,0,[],"...."]
  const std::string prefix = "[0,\"" + std::string(pk3) + "\",0,0,[],";
  EXPECT_EQ(c.substr(0, prefix.size()), prefix);
  EXPECT_EQ(c.back(), ']');
  return c.substr(prefix.size(), c.size() - prefix.size() - 1);
}

void replace_once(std::string& s, const std::string& from, const std::string& to) {
  auto pos = s.find(from);
  ASSERT_NE(pos, std::string::npos) << from << " not in " << s;
  s.replace(pos, from.size(), to);
}

void expect_invalid(std::string_view json, std::string_view reason_part) {
  auto r = parse_event(json);
  ASSERT_FALSE(r.has_value()) << "accepted: " << json;
  EXPECT_EQ(r.error().code, ec::invalid);
  EXPECT_NE(r.error().reason.find(reason_part), std::string::npos)
      << "reason '" << r.error().reason << "' lacks '" << reason_part << "' for " << json;
}

}  // namespace

// ---------------------------------------------------------------------------
// Canonical serialisation

TEST(Canonical, EmptyEvent) {
  event ev;
  ev.pubkey = std::string(pk3);
  EXPECT_EQ(canonical_serialization(ev), "[0,\"" + std::string(pk3) + "\",0,0,[],\"\"]");
}

TEST(Canonical, TwoCharEscapes) {
  EXPECT_EQ(canonical_content("a\nb"), R"("a\nb")");
  EXPECT_EQ(canonical_content("a\rb"), R"("a\rb")");
  EXPECT_EQ(canonical_content("a\tb"), R"("a\tb")");
  EXPECT_EQ(canonical_content("a\bb"), R"("a\bb")");
  EXPECT_EQ(canonical_content("a\fb"), R"("a\fb")");
  EXPECT_EQ(canonical_content("say \"hi\""), R"("say \"hi\"")");
  EXPECT_EQ(canonical_content("back\\slash"), R"("back\\slash")");
}

TEST(Canonical, OtherControlCharsAsLowercaseUnicodeEscapes) {
  EXPECT_EQ(canonical_content("a\0b"s), R"("a\u0000b")");
  EXPECT_EQ(canonical_content("\x01"), R"("\u0001")");
  EXPECT_EQ(canonical_content("\x0b"), R"("\u000b")");
  EXPECT_EQ(canonical_content("\x1f"), R"("\u001f")");
  EXPECT_EQ(canonical_content("\x1b[0m"), R"("\u001b[0m")");
}

TEST(Canonical, DelSlashAndNonAsciiVerbatim) {
  EXPECT_EQ(canonical_content("\x7f"), "\"\x7f\"");
  EXPECT_EQ(canonical_content("a/b"), "\"a/b\"");
  EXPECT_EQ(canonical_content("héllo 🐝"), "\"héllo 🐝\"");
  EXPECT_EQ(canonical_content("\u2028\u2029"), "\"\u2028\u2029\"");
}

TEST(Canonical, TagsAreEscapedToo) {
  event ev;
  ev.pubkey = std::string(pk3);
  ev.kind = 7;
  ev.created_at = 42;
  ev.tags = {{"e", "x\"y"}, {"t", "a\nb", "\x01"}};
  EXPECT_EQ(canonical_serialization(ev),
            "[0,\"" + std::string(pk3) + R"(",42,7,[["e","x\"y"],["t","a\nb","\u0001"]],""])");
}

// Known vector: canonical string and its SHA-256, computed independently with
//   printf '%s\x7f%s' '[0,"f930...",1700000000,1,[...],"hello \"world\"\n\\ héllo 🐝\u0000\u001f' '"]'
//     | sha256sum
TEST(Canonical, KnownVector) {
  event ev;
  ev.pubkey = std::string(pk3);
  ev.created_at = 1700000000;
  ev.kind = 1;
  ev.tags = {{"e", "5c83da77af1dec6d7289834998ad7aafbd9e2191396d75ec3cc27f5a77226f36"},
             {"t", "nostr"}};
  ev.content = "hello \"world\"\n\\ héllo 🐝\0\x1f\x7f"s;
  const std::string expected =
      "[0,\"f9308a019258c31049344f85f89d5229b531c845836f99b08601f113bce036f9\",1700000000,1,"
      "[[\"e\",\"5c83da77af1dec6d7289834998ad7aafbd9e2191396d75ec3cc27f5a77226f36\"],"
      "[\"t\",\"nostr\"]],\"hello \\\"world\\\"\\n\\\\ h\xc3\xa9llo \xf0\x9f\x90\x9d"
      "\\u0000\\u001f\x7f\"]";
  EXPECT_EQ(canonical_serialization(ev), expected);
  EXPECT_EQ(compute_id(ev), "d5dfc583dd1289b3ea527ecb3c53207836930daba6afc71924def987e8ddadce");
}

TEST(Canonical, KnownVectorEmpty) {
  // printf '%s' '[0,"f930...36f9",0,0,[],""]' | sha256sum
  event ev;
  ev.pubkey = std::string(pk3);
  EXPECT_EQ(compute_id(ev), "e37d3d8a5cd27629fd198d21819aedd901a0a84297c9d9259543e162891c72aa");
}

// ---------------------------------------------------------------------------
// Keys, signing, verification

TEST(Keys, PubkeyOfKnownSecrets) {
  EXPECT_EQ(pubkey_of(sk3), pk3);
  EXPECT_EQ(pubkey_of(sk1), pk1);
  EXPECT_THROW(pubkey_of("00"), std::invalid_argument);
  EXPECT_THROW(pubkey_of(std::string(64, '0')), std::invalid_argument);  // zero is not a key
  EXPECT_THROW(pubkey_of(std::string(64, 'g')), std::invalid_argument);
}

TEST(Sign, RoundTrip) {
  event ev = signed_event("héllo 🐝\nline two", {{"e", std::string(64, 'a')}, {"t", "bees"}});
  EXPECT_EQ(ev.pubkey, pk1);
  EXPECT_EQ(ev.id, compute_id(ev));
  EXPECT_TRUE(is_lower_hex(ev.sig, 128));
  EXPECT_EQ(ev.raw, to_json(ev));
  EXPECT_TRUE(verify_signature(ev));
  EXPECT_TRUE(verify_schnorr(ev.pubkey, ev.id, ev.sig));

  auto parsed = parse_event(ev.raw);
  ASSERT_TRUE(parsed.has_value()) << parsed.error().reason;
  EXPECT_EQ(*parsed, ev);
  EXPECT_TRUE(verify_signature(*parsed));
}

TEST(Sign, TwoSignaturesDifferButBothVerify) {
  event a = signed_event("same");
  event b = signed_event("same");
  EXPECT_EQ(a.id, b.id);
  EXPECT_NE(a.sig, b.sig);  // random aux bytes
  EXPECT_TRUE(verify_signature(a));
  EXPECT_TRUE(verify_signature(b));
}

TEST(Sign, TamperedEventsFailVerification) {
  const event ev = signed_event("original");
  {
    event t = ev;
    t.content = "tampered";
    EXPECT_TRUE(verify_signature(t));  // id and sig still agree with each other...
    EXPECT_NE(compute_id(t), t.id);    // ...but the id no longer matches the content
    t.id = compute_id(t);              // re-deriving the id breaks the signature
    EXPECT_FALSE(verify_signature(t));
    t.raw = to_json(t);
    EXPECT_TRUE(parse_event(t.raw).has_value());  // parse does not verify signatures
    EXPECT_FALSE(verify_signature(*parse_event(t.raw)));
  }
  {
    event t = ev;
    t.content = "tampered";
    expect_invalid(to_json(t), "event id does not match its content");
  }
  {
    event t = ev;
    t.sig[10] = t.sig[10] == '0' ? '1' : '0';
    EXPECT_FALSE(verify_signature(t));
  }
  {
    event t = ev;
    t.pubkey = std::string(pk3);
    t.id = compute_id(t);
    EXPECT_FALSE(verify_signature(t));
  }
  {
    event t = ev;
    t.sig = "zz";
    EXPECT_FALSE(verify_signature(t));
  }
}

// ---------------------------------------------------------------------------
// to_json and parse_event

TEST(ToJson, FieldOrderAndCompactness) {
  event ev;
  ev.id = std::string(64, '1');
  ev.pubkey = std::string(64, '2');
  ev.created_at = 5;
  ev.kind = 30023;
  ev.tags = {{"d", "x"}};
  ev.content = "q\"\x7f";
  ev.sig = std::string(128, '3');
  EXPECT_EQ(to_json(ev), "{\"id\":\"" + std::string(64, '1') + "\",\"pubkey\":\"" +
                             std::string(64, '2') +
                             "\",\"created_at\":5,\"kind\":30023,\"tags\":[[\"d\",\"x\"]],"
                             "\"content\":\"q\\\"\x7f\",\"sig\":\"" +
                             std::string(128, '3') + "\"}");
}

TEST(Parse, AcceptsNonCompactInputAndReserialises) {
  event ev = signed_event("é/", {{"p", std::string(pk3)}});
  // Different field order, whitespace, escaped solidus and \u escapes, extra field.
  std::string json = "{ \"sig\": \"" + ev.sig + "\", \"content\": \"\\u00e9\\/\",\n \"kind\": 1, " +
                     "\"tags\": [ [\"p\", \"" + std::string(pk3) + "\"] ], \"extra\": {\"x\": [1]}, " +
                     "\"created_at\": 1700000000, \"pubkey\": \"" + ev.pubkey + "\", \"id\": \"" +
                     ev.id + "\" }";
  auto r = parse_event(json);
  ASSERT_TRUE(r.has_value()) << r.error().reason;
  EXPECT_EQ(*r, ev);
  EXPECT_EQ(r->raw, ev.raw);
  EXPECT_TRUE(verify_signature(*r));
}

TEST(Parse, EmbeddedNulAndControlCharsSurvive) {
  event ev = signed_event("a\0b\x01\n"s, {{"t", "x\0y"s}});
  EXPECT_NE(ev.raw.find("a\\u0000b\\u0001\\n"), std::string::npos);
  auto r = parse_event(ev.raw);
  ASSERT_TRUE(r.has_value()) << r.error().reason;
  EXPECT_EQ(r->content, "a\0b\x01\n"s);
  EXPECT_EQ(r->content.size(), 5u);
  EXPECT_EQ(r->tags[0][1], "x\0y"s);
  EXPECT_EQ(*r, ev);
}

TEST(Parse, SurrogatePairEscapeIsDecodedToUtf8) {
  event ev = signed_event("🐝");
  std::string json = ev.raw;
  replace_once(json, "🐝", "\\ud83d\\udc1d");
  auto r = parse_event(json);
  ASSERT_TRUE(r.has_value()) << r.error().reason;
  EXPECT_EQ(r->content, "🐝");
  EXPECT_EQ(r->raw, ev.raw);
}

TEST(Parse, RejectsInvalidUtf8) {
  event ev = signed_event("XX");
  std::string bad = ev.raw;
  replace_once(bad, "\"XX\"", "\"\xff\xfe\"");
  expect_invalid(bad, "not valid JSON");
  bad = ev.raw;
  replace_once(bad, "\"XX\"", "\"\xc3\"");  // truncated sequence
  expect_invalid(bad, "not valid JSON");
  bad = ev.raw;
  replace_once(bad, "\"XX\"", "\"\xc0\xaf\"");  // overlong '/'
  expect_invalid(bad, "not valid JSON");
  bad = ev.raw;
  replace_once(bad, "\"XX\"", "\"\xed\xa0\x80\"");  // raw surrogate
  expect_invalid(bad, "not valid JSON");
  // Lone surrogates written as escapes decode to invalid UTF-8: rejected too.
  bad = ev.raw;
  replace_once(bad, "\"XX\"", "\"\\udc00\"");
  expect_invalid(bad, "UTF-8");
  bad = ev.raw;
  replace_once(bad, "\"XX\"", "\"\\ud83d\"");
  expect_invalid(bad, "not valid JSON");
  bad = ev.raw;
  replace_once(bad, "[]", "[[\"t\",\"\\udfff\"]]");
  expect_invalid(bad, "UTF-8");
}

TEST(Parse, RejectsBadHexFields) {
  const event ev = signed_event();
  auto with = [&](const std::string& field, const std::string& value) {
    std::string j = ev.raw;
    const std::string& old = field == "id" ? ev.id : field == "pubkey" ? ev.pubkey : ev.sig;
    replace_once(j, "\"" + field + "\":\"" + old + "\"", "\"" + field + "\":" + value);
    return j;
  };
  std::string upper_id = ev.id;
  for (auto& c : upper_id) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  std::string upper_pk = ev.pubkey;
  for (auto& c : upper_pk) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  std::string upper_sig = ev.sig;
  for (auto& c : upper_sig) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));

  expect_invalid(with("id", "\"" + upper_id + "\""), "id must be 64 lowercase hex");
  expect_invalid(with("id", "\"" + ev.id.substr(0, 63) + "\""), "id must be 64 lowercase hex");
  expect_invalid(with("id", "\"" + ev.id + "0\""), "id must be 64 lowercase hex");
  expect_invalid(with("id", "\"" + std::string(63, 'a') + "g\""), "id must be 64 lowercase hex");
  expect_invalid(with("id", "\"\""), "id must be 64 lowercase hex");
  expect_invalid(with("id", "123"), "id must be a string");
  expect_invalid(with("pubkey", "\"" + upper_pk + "\""), "pubkey must be 64 lowercase hex");
  expect_invalid(with("pubkey", "\"" + ev.pubkey.substr(2) + "\""), "pubkey must be 64");
  expect_invalid(with("pubkey", "null"), "pubkey must be a string");
  expect_invalid(with("sig", "\"" + upper_sig + "\""), "sig must be 128 lowercase hex");
  expect_invalid(with("sig", "\"" + ev.sig.substr(0, 126) + "\""), "sig must be 128");
  expect_invalid(with("sig", "[]"), "sig must be a string");
  expect_invalid(with("id", "\"" + std::string(64, '0') + "\""),
                 "event id does not match its content");
}

TEST(Parse, RejectsMissingFields) {
  const event ev = signed_event();
  const std::pair<std::string, std::string> fields[] = {
      {"id", "\"id\":\"" + ev.id + "\","},
      {"pubkey", "\"pubkey\":\"" + ev.pubkey + "\","},
      {"created_at", "\"created_at\":1700000000,"},
      {"kind", "\"kind\":1,"},
      {"tags", "\"tags\":[],"},
      {"content", "\"content\":\"hello\","},
      {"sig", ",\"sig\":\"" + ev.sig + "\""},
  };
  for (const auto& [name, text] : fields) {
    std::string j = ev.raw;
    replace_once(j, text, "");
    expect_invalid(j, "missing event field: " + name);
  }
}

TEST(Parse, RejectsWrongTypesAndRanges) {
  const event ev = signed_event();
  auto with = [&](const std::string& from, const std::string& to) {
    std::string j = ev.raw;
    replace_once(j, from, to);
    return j;
  };
  expect_invalid(with("\"created_at\":1700000000", "\"created_at\":\"1700000000\""), "created_at");
  expect_invalid(with("\"created_at\":1700000000", "\"created_at\":-1"), "created_at");
  expect_invalid(with("\"created_at\":1700000000", "\"created_at\":1700000000.5"), "created_at");
  expect_invalid(with("\"created_at\":1700000000", "\"created_at\":1.7e9"), "created_at");
  expect_invalid(with("\"created_at\":1700000000", "\"created_at\":9223372036854775808"),
                 "created_at");
  expect_invalid(with("\"created_at\":1700000000", "\"created_at\":99999999999999999999999"),
                 "created_at");
  expect_invalid(with("\"kind\":1", "\"kind\":65536"), "kind must be an integer between 0 and 65535");
  expect_invalid(with("\"kind\":1", "\"kind\":-1"), "kind");
  expect_invalid(with("\"kind\":1", "\"kind\":1.0"), "kind");
  expect_invalid(with("\"kind\":1", "\"kind\":\"1\""), "kind");
  expect_invalid(with("\"kind\":1", "\"kind\":null"), "kind");
  expect_invalid(with("\"content\":\"hello\"", "\"content\":5"), "content must be a string");
  expect_invalid(with("\"content\":\"hello\"", "\"content\":null"), "content must be a string");
  expect_invalid(with("\"tags\":[]", "\"tags\":{}"), "tags must be an array");
  expect_invalid(with("\"tags\":[]", "\"tags\":\"e\""), "tags must be an array");
  expect_invalid(with("\"tags\":[]", "\"tags\":[\"e\"]"), "each tag must be an array of strings");
  expect_invalid(with("\"tags\":[]", "\"tags\":[[\"e\",1]]"), "each tag must be an array of strings");
  expect_invalid(with("\"tags\":[]", "\"tags\":[[\"e\",[\"x\"]]]"), "each tag must be an array");
  expect_invalid(with("\"tags\":[]", "\"tags\":[[\"e\",null]]"), "each tag must be an array");
  expect_invalid(with("\"tags\":[]", "\"tags\":[[]]"), "a tag must not be empty");
  expect_invalid(with("\"kind\":1", "\"kind\":1,\"kind\":1"), "duplicate event field: kind");
}

TEST(Parse, KindAndCreatedAtBoundaries) {
  for (int kind : {0, 65535}) {
    event ev = unsigned_event();
    ev.kind = kind;
    ev.created_at = 0;
    sign(ev, sk3);
    auto r = parse_event(ev.raw);
    ASSERT_TRUE(r.has_value()) << r.error().reason;
    EXPECT_EQ(r->kind, kind);
    EXPECT_EQ(r->created_at, 0);
  }
  event ev = unsigned_event();
  ev.created_at = INT64_MAX;
  sign(ev, sk3);
  auto r = parse_event(ev.raw);
  ASSERT_TRUE(r.has_value()) << r.error().reason;
  EXPECT_EQ(r->created_at, INT64_MAX);
}

TEST(Parse, RejectsNonObjectsAndGarbage) {
  expect_invalid("", "not valid JSON");
  expect_invalid("{", "not valid JSON");
  expect_invalid("[]", "event must be a JSON object");
  expect_invalid("\"x\"", "event must be a JSON object");
  expect_invalid("{} {}", "not valid JSON");
  expect_invalid("{}", "missing event field: id");
  expect_invalid(std::string(100000, '['), "not valid JSON");  // no stack overflow
}

TEST(Parse, ReadsOnlyTheGivenView) {
  event ev = signed_event();
  const std::string buffer = ev.raw + "{\"trailing\":1}";
  auto r = parse_event(std::string_view(buffer).substr(0, ev.raw.size()));
  ASSERT_TRUE(r.has_value()) << r.error().reason;
  EXPECT_EQ(*r, ev);
}

TEST(Parse, IgnoresUnknownFields) {
  event ev = signed_event();
  std::string j = ev.raw;
  replace_once(j, "{", "{\"relay\":\"wss://x\",\"seen\":[1,2,{}],");
  auto r = parse_event(j);
  ASSERT_TRUE(r.has_value()) << r.error().reason;
  EXPECT_EQ(r->raw, ev.raw);
}

// ---------------------------------------------------------------------------
// Tags and hex helpers

TEST(Tags, FirstTagValueAndDTag) {
  event ev;
  EXPECT_EQ(first_tag_value(ev, "d"), std::nullopt);
  EXPECT_EQ(d_tag(ev), "");
  ev.tags = {{"e", "one"}, {"d"}, {"d", "second"}, {"p", "x", "y"}, {"e", "two"}};
  EXPECT_EQ(first_tag_value(ev, "e"), "one");
  EXPECT_EQ(first_tag_value(ev, "d"), "");  // the first d tag has no value
  EXPECT_EQ(d_tag(ev), "");
  EXPECT_EQ(first_tag_value(ev, "p"), "x");
  EXPECT_EQ(first_tag_value(ev, "q"), std::nullopt);
  ev.tags = {{"d", "slug"}};
  EXPECT_EQ(d_tag(ev), "slug");
}

TEST(Hex, Helpers) {
  const unsigned char bytes[] = {0x00, 0x01, 0xab, 0xff};
  EXPECT_EQ(to_hex(bytes, 4), "0001abff");
  unsigned char out[4];
  ASSERT_TRUE(from_hex("0001abff", out, 4));
  EXPECT_EQ(0, std::memcmp(out, bytes, 4));
  ASSERT_TRUE(from_hex("0001ABFF", out, 4));  // the decoder accepts either case
  EXPECT_EQ(0, std::memcmp(out, bytes, 4));
  EXPECT_FALSE(from_hex("0001abf", out, 4));
  EXPECT_FALSE(from_hex("0001abfg", out, 4));
  EXPECT_TRUE(is_lower_hex("00ff", 4));
  EXPECT_FALSE(is_lower_hex("00FF", 4));
  EXPECT_FALSE(is_lower_hex("00ff", 3));
  EXPECT_FALSE(is_lower_hex("00f ", 4));
}
