// `waggle import` and `waggle export` against the real binary
// (docs/portability.md): each refused line is named by its number and the
// lines around it load; the exit codes 0 (all loaded), 3 (some refused),
// 1 (fatal), 2 (usage); an export names the hosts when it must be told one.

#include <sys/wait.h>

#include <cstdio>

#include "tests/e2e/portability_fixture.hpp"
#include "tests/support/test_paths.hpp"

namespace waggle::portability_test {
namespace {

struct run_result {
  int code = -1;
  std::string out;  // stdout
  std::string err;  // stderr
};

class PortabilityCli : public PortabilityTest {
 protected:
  run_result waggle(const std::string& args) {
    auto err_path = (dir_ / "stderr").string();
    std::string cmd = std::string(test_paths::binary) + " " + args + " 2>'" + err_path + "'";
    run_result r;
    FILE* p = popen(cmd.c_str(), "r");
    if (!p)
      return r;
    char buf[4096];
    while (size_t n = fread(buf, 1, sizeof(buf), p))
      r.out.append(buf, n);
    int st = pclose(p);
    r.code = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    std::ifstream in{err_path};
    r.err.assign(std::istreambuf_iterator<char>(in), {});
    return r;
  }

  std::string write_file(const std::vector<std::string>& lines, bool final_newline = true) {
    auto path = (dir_ / ("import-" + std::to_string(files_++) + ".jsonl")).string();
    std::ofstream out{path, std::ios::binary};
    for (size_t i = 0; i < lines.size(); ++i)
      out << lines[i] << (i + 1 < lines.size() || final_newline ? "\n" : "");
    return path;
  }

  run_result import(const relay_side& s, const std::string& file, const std::string& extra = "") {
    return waggle("import '" + file + "' --community " + s.host + " --database-url '" + s.db->url()
                  + "' --relay-key-file '" + s.key_file + "' " + extra);
  }

  static bool stored(const relay_side& s, const std::string& id) {
    auto conn = s.db->connect();
    pqxx::nontransaction tx(*conn);
    return !tx.exec_params("SELECT 1 FROM events WHERE community_id = $1 AND id = decode($2, 'hex')",
                           s.community_id, id)
              .empty();
  }

  int files_ = 0;
};

proto::event note(int n) {
  return signed_by(5 + n % 4, 1, 1'600'000'000 + n, {}, "good line " + std::to_string(n));
}

// Must-show (b): a bad signature, a truncated line, group state signed by
// another relay and by this very relay, an expired event, between good
// lines: each refused with its line number, every other line stored.
TEST_F(PortabilityCli, EachRefusedLineIsNamedByItsNumberAndTheOthersLoad) {
  auto b = side("cli-b.test", 911);
  const std::string other_relay = test::secret(912);
  auto forged = note(3);
  auto bad_sig = forged.sig;
  bad_sig[10] = bad_sig[10] == 'a' ? 'b' : 'a';
  forged.raw.replace(forged.raw.find(forged.sig), bad_sig.size(), bad_sig);
  auto truncated = note(5).raw;
  truncated.resize(truncated.size() / 2);
  auto other_state = [&](int32_t kind) {
    return test::event_builder{other_relay}.kind(kind).at(1'600'000'100).tag({"d", "general"}).sign().raw;
  };
  auto own_state =
    test::event_builder{b.relay_secret}.kind(39002).at(1'600'000'101).tag({"d", "general"}).sign().raw;
  auto expired = signed_by(6, 1, 1'600'000'102, {{"expiration", "1600000103"}}, "gone");
  std::vector<std::string> lines{
    note(1).raw,          // 1
    note(2).raw,          // 2
    forged.raw,           // 3
    note(4).raw,          // 4
    truncated,            // 5
    note(6).raw,          // 6
    other_state(39000),   // 7
    other_state(39001),   // 8
    other_state(39002),   // 9
    other_state(39003),   // 10
    own_state,            // 11
    expired.raw,          // 12
    note(13).raw,         // 13
  };
  auto r = import(b, write_file(lines));
  EXPECT_EQ(r.code, 3) << r.err;
  for (auto [n, reason] : std::vector<std::pair<int, std::string>>{
         {3, "invalid: bad signature"},
         {7, "restricted: relay-signed group state is re-derived, not imported (kind 39000)"},
         {8, "restricted: relay-signed group state is re-derived, not imported (kind 39001)"},
         {9, "restricted: relay-signed group state is re-derived, not imported (kind 39002)"},
         {10, "restricted: relay-signed group state is re-derived, not imported (kind 39003)"},
         {11, "restricted: relay-signed group state is re-derived, not imported (kind 39002)"},
         {12, "invalid: event has expired"}})
    EXPECT_NE(r.err.find("line " + std::to_string(n) + ": " + reason + "\n"), std::string::npos)
      << "line " << n << " in:\n" << r.err;
  EXPECT_NE(r.err.find("line 5: invalid: "), std::string::npos) << r.err;
  for (int n : {1, 2, 4, 6, 13})
    EXPECT_TRUE(stored(b, note(n).id)) << "line " << n << "\n" << r.err;
  EXPECT_NE(r.out.find("13 lines read, 5 stored, 0 duplicates, 8 refused"), std::string::npos)
    << r.out;
  EXPECT_NE(r.out.find("signed by relay " + b.relay_pubkey), std::string::npos) << r.out;
}

TEST_F(PortabilityCli, OversizeLinesAreRefusedAndNeverHeldAndExitCodesSayWhatHappened) {
  auto b = side("cli-codes.test", 913);
  std::string huge = "{\"content\":\"" + std::string(200 * 1024, 'y') + "\"}";
  auto r = import(b, write_file({note(1).raw, huge, "", note(2).raw}, false));
  EXPECT_EQ(r.code, 3) << r.err;
  EXPECT_NE(r.err.find("line 2: invalid: event is larger than 65536 bytes (--max-frame-bytes)\n"),
            std::string::npos) << r.err;
  EXPECT_TRUE(stored(b, note(1).id));
  EXPECT_TRUE(stored(b, note(2).id));  // the last line, without its newline
  EXPECT_NE(r.out.find("4 lines read, 2 stored, 0 duplicates, 1 refused"), std::string::npos) << r.out;

  // The same file again: nothing refused but the oversize line; a clean file exits 0
  // and counts what it already had as duplicates.
  auto again = import(b, write_file({note(1).raw, note(2).raw, note(3).raw}), "--batch 2");
  EXPECT_EQ(again.code, 0) << again.err;
  EXPECT_NE(again.out.find("3 lines read, 1 stored, 2 duplicates, 0 refused"), std::string::npos)
    << again.out;

  auto unknown = waggle("import '" + write_file({note(1).raw}) + "' --community nowhere.test "
                        "--database-url '" + b.db->url() + "' --relay-key-file '" + b.key_file + "'");
  EXPECT_EQ(unknown.code, 1);
  EXPECT_NE(unknown.err.find("no community nowhere.test"), std::string::npos) << unknown.err;
  EXPECT_NE(unknown.err.find("cli-codes.test"), std::string::npos) << unknown.err;
  EXPECT_EQ(waggle("import x.jsonl --database-url '" + b.db->url() + "'").code, 2);
  EXPECT_EQ(import(b, write_file({}), "--batch 0").code, 2);
}

TEST_F(PortabilityCli, ExportNeedsACommunityOnlyWhenThereAreSeveral) {
  auto a = side("cli-a.test", 914);
  std::vector<std::string> lines;
  for (int n = 1; n <= 5; ++n)
    lines.push_back(note(n).raw);
  ASSERT_EQ(import(a, write_file(lines)).code, 0);
  auto only = waggle("export --database-url '" + a.db->url() + "'");
  EXPECT_EQ(only.code, 0) << only.err;
  std::string all;
  for (auto& l : lines)
    all += l + "\n";
  EXPECT_EQ(only.out, all);
  EXPECT_NE(only.err.find("cli-a.test: 5 events"), std::string::npos) << only.err;
  auto window = waggle("export --since 1600000002 --until 1600000003 --database-url '" + a.db->url() + "'");
  EXPECT_EQ(window.out, lines[1] + "\n" + lines[2] + "\n");

  {
    auto conn = a.db->connect();
    ASSERT_TRUE(db::add_community(*conn, "cli-second.test", "", community_policy::open).has_value());
  }
  auto ambiguous = waggle("export --database-url '" + a.db->url() + "'");
  EXPECT_EQ(ambiguous.code, 1);
  EXPECT_NE(ambiguous.err.find("cli-a.test, cli-second.test"), std::string::npos) << ambiguous.err;
  auto named = waggle("export --community cli-second.test --database-url '" + a.db->url() + "'");
  EXPECT_EQ(named.code, 0) << named.err;
  EXPECT_EQ(named.out, "");
}

}  // namespace
}  // namespace waggle::portability_test
