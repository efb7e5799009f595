// `waggle export` and `waggle import`'s engine, in process (docs/portability.md):
// event_loader over a node's own actors, db::export_events over its database.
//  (a) a round trip A -> export -> B -> export is byte-identical, and B's
//      channel roster is re-derived by B and signed with B's key;
//  (c) duplicates are skipped and counted, across loads and within one;
//  (d) SQL-looking text is stored verbatim or refused cleanly, oversize
//      events are refused, and nothing else is lost.
// The command line (line numbers, exit codes) is portability_cli_test.

#include "tests/e2e/portability_fixture.hpp"

#include <algorithm>
#include <set>
#include <tuple>

#include "messages/proto/nip29.hpp"

namespace waggle::portability_test {
namespace {

// Signers: 1 owns the channel, 2..4 are put in it, 5..12 only post notes.
constexpr int owner = 1, bob = 2, carol = 3, dave = 4;

std::string pk(int n) { return proto::pubkey_of(test::secret(n)); }

struct history {
  std::vector<std::string> lines;  // in the order a client sent them
  std::set<std::string> not_live;  // ids an export must not hold
};

// A few thousand events as a team's history: a channel whose roster is
// built and changed by commands, posts in it, notes, replaced versions, a
// deletion, and messages that expire an hour from now.
history team_history(int64_t t0, int64_t now) {
  history h;
  auto add = [&](const proto::event& ev) { h.lines.push_back(ev.raw); };
  add(signed_by(owner, 9007, t0, {{"h", "general"}, {"name", "General"}}));
  for (int m : {bob, carol, dave})
    add(signed_by(owner, 9000, t0 + m, {{"h", "general"}, {"p", pk(m), "member"}}));
  auto profile_v1 = signed_by(owner, 0, t0 + 10, {}, R"({"name":"owner"})");
  add(profile_v1);
  h.not_live.insert(profile_v1.id);
  auto article_v1 = signed_by(bob, 30023, t0 + 11, {{"d", "plan"}}, "draft");
  add(article_v1);
  h.not_live.insert(article_v1.id);
  auto oops = signed_by(bob, 1, t0 + 12, {}, "wrong channel, sorry");
  add(oops);
  h.not_live.insert(oops.id);
  for (int i = 0; i < 3000; ++i) {
    int64_t at = t0 + 20 + i / 4;
    if (i % 3 == 0)
      add(signed_by(bob + i % 3 + (i / 3) % 3, 9, at, {{"h", "general"}}, "post " + std::to_string(i)));
    else
      add(signed_by(5 + i % 8, 1, at, {}, "note " + std::to_string(i)));
  }
  int64_t later = t0 + 20 + 3000 / 4 + 10;
  add(signed_by(owner, 0, later, {}, R"({"name":"owner","about":"runs the channel"})"));
  add(signed_by(bob, 30023, later + 1, {{"d", "plan"}}, "final"));
  add(signed_by(bob, 5, later + 2, {{"e", oops.id}}, "deleted"));
  for (int i = 0; i < 5; ++i) {
    auto brief = signed_by(dave, 1, later + 3,
                           {{"expiration", std::to_string(now + 3600)}}, "brief " + std::to_string(i));
    add(brief);
    h.not_live.insert(brief.id);  // by the time of the export below
  }
  add(signed_by(owner, 9001, later + 10, {{"h", "general"}, {"p", pk(carol)}}));
  add(signed_by(owner, 9002, later + 11, {{"h", "general"}, {"name", "General (archive)"}}));
  return h;
}

std::vector<std::pair<std::string, std::string>> roster_of(const proto::event& ev) {
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto& t : ev.tags)
    if (t.size() >= 4 && t[0] == "p")
      out.emplace_back(t[1], t[3]);
  std::sort(out.begin(), out.end());
  return out;
}

TEST_F(PortabilityTest, ARoundTripIsIdenticalAndTheRosterIsReDerivedByTheImportingRelay) {
  auto a = side("a.test", 901);
  auto b = side("b.test", 902);
  const int64_t now = wall_now();
  auto h = team_history(1'600'000'000, now);

  auto loaded = load(a, h.lines);
  ASSERT_EQ(loaded.size(), h.lines.size());
  for (size_t i = 0; i < loaded.size(); ++i)
    ASSERT_EQ(loaded[i].status, load_status::stored) << "line " << i + 1 << ": " << loaded[i].reason;

  // An export two hours on: the briefs have expired by then.
  const int64_t export_at = now + 7200;
  auto from_a = export_lines(a, export_at);
  EXPECT_EQ(from_a.size(), h.lines.size() - h.not_live.size());
  for (const auto& line : from_a) {
    auto ev = proto::parse_event(line);
    ASSERT_TRUE(ev.has_value());
    EXPECT_FALSE(h.not_live.contains(ev->id)) << line;
    EXPECT_FALSE(proto::nip29::is_group_state(ev->kind)) << line;
  }
  EXPECT_TRUE(std::is_sorted(from_a.begin(), from_a.end(), [](const auto& x, const auto& y) {
    auto ex = *proto::parse_event(x), ey = *proto::parse_event(y);
    return std::tie(ex.created_at, ex.id) < std::tie(ey.created_at, ey.id);
  }));

  auto into_b = load(b, from_a);
  EXPECT_EQ(count_of(into_b, load_status::stored), from_a.size());
  auto from_b = export_lines(b, export_at);
  EXPECT_EQ(from_b, from_a);  // byte for byte

  // B's roster: re-derived from the commands B applied, signed by B's key.
  auto roster_a = live_of_kind(a, proto::nip29::kind_group_members);
  auto roster_b = live_of_kind(b, proto::nip29::kind_group_members);
  ASSERT_EQ(roster_a.size(), 1u);
  ASSERT_EQ(roster_b.size(), 1u);
  EXPECT_EQ(roster_a[0].pubkey, a.relay_pubkey);
  EXPECT_EQ(roster_b[0].pubkey, b.relay_pubkey);
  EXPECT_TRUE(proto::verify_signature(roster_b[0]));
  std::vector<std::pair<std::string, std::string>> expected{
    {pk(owner), "owner"}, {pk(bob), "member"}, {pk(dave), "member"}};
  std::sort(expected.begin(), expected.end());
  EXPECT_EQ(roster_of(roster_b[0]), expected);
  EXPECT_EQ(roster_of(roster_a[0]), expected);
  auto meta_b = live_of_kind(b, proto::nip29::kind_group_metadata);
  ASSERT_EQ(meta_b.size(), 1u);
  EXPECT_EQ(meta_b[0].pubkey, b.relay_pubkey);
  EXPECT_EQ(proto::first_tag_value(meta_b[0], "name").value_or(""), "General (archive)");
}

TEST_F(PortabilityTest, DuplicatesAreSkippedAndCounted) {
  auto a = side("dup.test", 903);
  std::vector<std::string> lines;
  for (int i = 0; i < 50; ++i)
    lines.push_back(signed_by(5 + i % 4, 1, 1'600'000'000 + i, {}, "n" + std::to_string(i)).raw);
  event_loader loader{config_for(a)};
  auto first = loader.load(lines);
  EXPECT_EQ(count_of(first, load_status::stored), 50u);
  // Again: every one already stored. Within one load, a repeated line is
  // answered with its first copy's answer, and written once.
  auto again = lines;
  again.push_back(lines[0]);
  auto fresh = signed_by(9, 1, 1'600'000'100, {}, "fresh").raw;
  again.push_back(fresh);
  again.push_back(fresh);
  auto second = loader.load(again);
  ASSERT_EQ(second.size(), 53u);
  EXPECT_EQ(count_of(second, load_status::duplicate), 52u);
  EXPECT_EQ(second[51].status, load_status::stored);
  EXPECT_EQ(second[52].status, load_status::duplicate);
  EXPECT_EQ(second[52].reason, "duplicate: already have this event");
  auto conn = a.db->connect();
  pqxx::nontransaction tx(*conn);
  EXPECT_EQ(tx.exec_params("SELECT count(*) FROM events WHERE community_id = $1", a.community_id)[0][0]
              .as<int64_t>(),
            51);
}

TEST_F(PortabilityTest, SqlLookingTextIsStoredVerbatimOrRefusedAndOversizeIsRefused) {
  auto a = side("sql.test", 904);
  const std::string sql = "'); DROP TABLE events; -- \" \\ $1 %s";
  auto in_content = signed_by(5, 1, 1'600'000'000, {}, sql);
  auto in_tags = signed_by(6, 1, 1'600'000'001, {{"t", sql}, {"x", "a'b", "c\"d"}}, "tags");
  auto in_d = signed_by(7, 30023, 1'600'000'002, {{"d", sql}}, "article");
  std::vector<std::string> lines{
    in_content.raw,
    "DROP TABLE events;",
    R"({"id":"'; DELETE FROM events; --","pubkey":"x","created_at":1,"kind":1,"tags":[],"content":"","sig":"y"})",
    in_tags.raw,
    signed_by(8, 1, 1'600'000'003, {}, std::string(70 * 1024, 'x')).raw,  // over 64 KiB
    in_d.raw,
  };
  auto results = load(a, lines);
  ASSERT_EQ(results.size(), lines.size());
  EXPECT_EQ(results[0].status, load_status::stored) << results[0].reason;
  EXPECT_EQ(results[1].status, load_status::refused);
  EXPECT_EQ(results[1].reason.rfind("invalid: ", 0), 0u) << results[1].reason;
  EXPECT_EQ(results[2].status, load_status::refused);
  EXPECT_EQ(results[2].reason.rfind("invalid: ", 0), 0u) << results[2].reason;
  EXPECT_EQ(results[3].status, load_status::stored) << results[3].reason;
  EXPECT_EQ(results[4].status, load_status::refused);
  EXPECT_EQ(results[4].reason, "invalid: event is larger than 65536 bytes (--max-frame-bytes)");
  EXPECT_EQ(results[5].status, load_status::stored) << results[5].reason;

  // Stored as sent, and exported byte for byte; the table is all there.
  auto out = export_lines(a, wall_now());
  EXPECT_EQ(out, (std::vector<std::string>{in_content.raw, in_tags.raw, in_d.raw}));
  auto conn = a.db->connect();
  // A host that looks like SQL is a host nobody has, said plainly.
  auto found = find_community(*conn, "x'); DROP TABLE communities; --");
  ASSERT_FALSE(found.has_value());
  EXPECT_NE(found.error().reason.find("no community"), std::string::npos) << found.error().reason;
  pqxx::nontransaction tx(*conn);
  EXPECT_EQ(tx.exec("SELECT count(*) FROM communities")[0][0].as<int64_t>(), 1);
}

}  // namespace
}  // namespace waggle::portability_test
