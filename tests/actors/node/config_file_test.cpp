// `waggle serve --config FILE`: which source wins (flag, then environment,
// then file, then default), and each way a file stops start-up, with a message
// naming the file, the line and the key (docs/operations.md, "Configuration
// file"). Flags and environment variables keep the messages they had.

#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "actors/node/config.hpp"

namespace waggle {
namespace {

namespace fs = std::filesystem;

const std::string key_a(64, 'a');
const std::string key_b(64, 'b');

class ConfigFile : public ::testing::Test {
 protected:
  void SetUp() override {
    auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = fs::temp_directory_path()
           / ("waggle-config-" + std::to_string(::getpid()) + "-" + info->name());
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // Writes `text` to <dir>/waggle.conf and returns its path.
  std::string write(const std::string& text) {
    auto path = (dir_ / "waggle.conf").string();
    std::ofstream{path, std::ios::binary} << text;
    return path;
  }

  status parse(const std::vector<std::string>& args, const env_map& env = {}) {
    cfg = node_config{};
    return parse_serve_config(cfg, args, env);
  }

  // What the node gets from no source at all.
  static node_config defaults() {
    node_config out;
    EXPECT_TRUE(parse_serve_config(out, {}, {}).ok());
    return out;
  }

  fs::path dir_;
  node_config cfg;
};

// -- precedence -------------------------------------------------------------

TEST_F(ConfigFile, AValueInTheFileOnlyIsUsed) {
  auto path = write("port = 8123\nrelay-name = My relay\nsearch = off\nnew-connections-burst = 2.5\n");
  ASSERT_TRUE(parse({"--config", path}).ok());
  EXPECT_EQ(cfg.port, 8123);
  EXPECT_EQ(cfg.relay_name, "My relay");
  EXPECT_FALSE(cfg.search);
  EXPECT_EQ(cfg.new_connections_burst, 2.5);
}

TEST_F(ConfigFile, TheEnvironmentWinsOverTheFile) {
  auto path = write("port = 8123\nmax-batch = 100\n");
  ASSERT_TRUE(parse({"--config", path}, {{"WAGGLE_PORT", "8124"}}).ok());
  EXPECT_EQ(cfg.port, 8124);
  EXPECT_EQ(cfg.max_batch, 100u);  // the file still sets what the environment does not
}

TEST_F(ConfigFile, AFlagWinsOverTheEnvironmentAndTheFile) {
  auto path = write("port = 8123\n");
  ASSERT_TRUE(parse({"--config", path, "--port", "8125"}, {{"WAGGLE_PORT", "8124"}}).ok());
  EXPECT_EQ(cfg.port, 8125);
  ASSERT_TRUE(parse({"--port=8126", "--config=" + path}, {{"WAGGLE_PORT", "8124"}}).ok());
  EXPECT_EQ(cfg.port, 8126);
}

TEST_F(ConfigFile, TheDefaultWhenNoSourceSetsAnOption) {
  auto path = write("port = 8123\n");
  ASSERT_TRUE(parse({"--config", path}).ok());
  EXPECT_EQ(cfg.max_frame_bytes, node_config{}.max_frame_bytes);
  EXPECT_EQ(cfg.relay_key_file, ".waggle/relay.key");
  ASSERT_TRUE(parse({"--config", write("# nothing set\n\n")}).ok());
  EXPECT_TRUE(cfg == defaults());
}

// A list is replaced whole by the source that wins, never merged with the
// one it beats.
TEST_F(ConfigFile, ListsTakeTheEnvironmentsTextAndAreReplacedWhole) {
  auto path = write("read-database-url = postgresql://a/x postgresql://b/x\n"
                    "sync-pubkeys = " + key_a + ", " + key_b + "\n"
                    "trusted-proxies = 10.0.0.1,10.0.0.2\n");
  ASSERT_TRUE(parse({"--config", path}).ok());
  EXPECT_EQ(cfg.read_database_urls, (std::vector<std::string>{"postgresql://a/x", "postgresql://b/x"}));
  EXPECT_EQ(cfg.sync_pubkeys, (std::vector<std::string>{key_a, key_b}));
  EXPECT_EQ(cfg.trusted_proxies, (std::vector<std::string>{"10.0.0.1", "10.0.0.2"}));

  ASSERT_TRUE(parse({"--config", path}, {{"WAGGLE_READ_DATABASE_URL", "postgresql://c/x"}}).ok());
  EXPECT_EQ(cfg.read_database_urls, (std::vector<std::string>{"postgresql://c/x"}));

  ASSERT_TRUE(parse({"--config", path, "--read-database-url", "postgresql://d/x",
                     "--read-database-url", "postgresql://e/x"},
                    {{"WAGGLE_READ_DATABASE_URL", "postgresql://c/x"}})
                  .ok());
  EXPECT_EQ(cfg.read_database_urls, (std::vector<std::string>{"postgresql://d/x", "postgresql://e/x"}));
}

TEST_F(ConfigFile, CommentsBlankLinesAndSpacesAreIgnored) {
  auto path = write("\n   # a comment\n\tport\t=\t8123  \r\n#max-batch = 7\n\n"
                    "relay-name = a # is part of the value\n");
  ASSERT_TRUE(parse({"--config", path}).ok());
  EXPECT_EQ(cfg.port, 8123);
  EXPECT_EQ(cfg.max_batch, node_config{}.max_batch);
  EXPECT_EQ(cfg.relay_name, "a # is part of the value");
}

TEST_F(ConfigFile, TheNewOptionsAreRead) {
  auto path = write("negentropy = off\nmax-neg-sessions = 2\nmax-neg-items = 1000\n"
                    "sync-pubkeys = " + key_a + "\n");
  ASSERT_TRUE(parse({"--config", path}).ok());
  EXPECT_FALSE(cfg.negentropy);
  EXPECT_EQ(cfg.max_neg_sessions, 2u);
  EXPECT_EQ(cfg.max_neg_items, 1000u);
  EXPECT_EQ(cfg.sync_pubkeys, std::vector<std::string>{key_a});
  ASSERT_TRUE(parse({}).ok());
  EXPECT_TRUE(cfg.negentropy);
  EXPECT_EQ(cfg.max_neg_sessions, 4u);
  EXPECT_EQ(cfg.max_neg_items, 500000u);
  EXPECT_TRUE(cfg.sync_pubkeys.empty());
}

// -- refusals: each names the file, the line and the key --------------------

TEST_F(ConfigFile, RefusesAnUnknownKey) {
  auto path = write("port = 7777\n\nprot = 7778\n");
  auto st = parse({"--config", path});
  EXPECT_EQ(st.reason, path + ":3: prot: unknown key (a key is a flag of `waggle serve "
                              "--help` without its --)");
  st = parse({"--config", write("--port = 7777\n")});
  EXPECT_EQ(st.reason, path + ":1: --port: unknown key (write it without the --: port)");
}

TEST_F(ConfigFile, RefusesABadValue) {
  std::string text;
  for (int i = 1; i < 12; ++i)
    text += "# line " + std::to_string(i) + "\n";
  auto path = write(text + "max-frame-bytes = 12x\n");
  auto st = parse({"--config", path});
  EXPECT_FALSE(st.ok());
  EXPECT_EQ(st.reason, path + ":12: max-frame-bytes: not a number: \"12x\"");

  // The same setters as flags and the environment: their words, their ranges.
  EXPECT_EQ(parse({"--config", write("search = yes\n")}).reason,
            path + ":1: search: not on or off: \"yes\"");
  EXPECT_EQ(parse({"--config", write("port = 70000\n")}).reason,
            path + ":1: port: out of range (0..65535): \"70000\"");
  EXPECT_EQ(parse({"--config", write("writers = -1\n")}).reason,
            path + ":1: writers: must not be negative: \"-1\"");
  EXPECT_EQ(parse({"--config", write("sync-pubkeys = " + key_a + " abc\n")}).reason,
            path + ":1: sync-pubkeys: entry 2 (\"abc\") is not 64 lowercase hex characters: \""
                + key_a + " abc\"");
  // A bad value stops start-up even where a flag would have won over it.
  EXPECT_FALSE(parse({"--config", write("port = x\n"), "--port", "7777"}).ok());
}

// A value every setter takes, but a check across options refuses: the
// message says where the file set it.
TEST_F(ConfigFile, RefusesAValueOutOfItsRangeNamingTheLine) {
  auto path = write("port = 7777\ncommit-siblings = 40\n");
  EXPECT_EQ(parse({"--config", path}).reason,
            "commit-siblings must be within 2..32 (commit-siblings from " + path + ":2)");
  EXPECT_EQ(parse({}, {{"WAGGLE_COMMIT_SIBLINGS", "40"}}).reason,
            "commit-siblings must be within 2..32");
  // The value refused is the variable's, not the file's: no line to name.
  EXPECT_EQ(parse({"--config", write("commit-siblings = 3\n")}, {{"WAGGLE_COMMIT_SIBLINGS", "40"}})
                .reason,
            "commit-siblings must be within 2..32");
}

TEST_F(ConfigFile, RefusesAMalformedLine) {
  auto path = write("port = 7777\nmax-batch 100\n");
  EXPECT_EQ(parse({"--config", path}).reason,
            path + ":2: max-batch 100: not a `key = value` line");
  EXPECT_EQ(parse({"--config", write("= 100\n")}).reason,
            path + ":1: = 100: not a `key = value` line");
}

TEST_F(ConfigFile, RefusesAKeyGivenTwice) {
  auto path = write("port = 7777\nmax-batch = 100\nport = 7778\n");
  EXPECT_EQ(parse({"--config", path}).reason, path + ":3: port: given twice (first on line 1)");
}

TEST_F(ConfigFile, RefusesAFileItCannotRead) {
  auto missing = (dir_ / "missing.conf").string();
  EXPECT_EQ(parse({"--config", missing}).reason,
            missing + ": cannot read the config file: No such file or directory");
  EXPECT_EQ(parse({"--config", dir_.string()}).reason,
            dir_.string() + ": cannot read the config file: Is a directory");
}

TEST_F(ConfigFile, RefusesConfigTwiceOrWithoutAFile) {
  auto path = write("port = 7777\n");
  EXPECT_EQ(parse({"--config", path, "--config", path}).reason, "--config given twice");
  EXPECT_EQ(parse({"--config"}).reason, "missing value for --config");
}

// -- the flag and environment paths report as they did ---------------------

TEST_F(ConfigFile, BadEnvironmentAndFlagValuesAreReportedAsBefore) {
  EXPECT_EQ(parse({}, {{"WAGGLE_PORT", "12x"}}).reason, "bad value for WAGGLE_PORT: 12x");
  EXPECT_EQ(parse({"--port", "7777"}, {{"WAGGLE_PORT", "12x"}}).reason,
            "bad value for WAGGLE_PORT: 12x");
  EXPECT_EQ(parse({"--port", "12x"}).reason, "bad value for --port: 12x");
  EXPECT_EQ(parse({"--prot", "1"}).reason, "unknown option --prot");
  EXPECT_EQ(parse({"--port"}).reason, "missing value for --port");
  auto path = write("port = 7777\n");
  EXPECT_EQ(parse({"--config", path}, {{"WAGGLE_SEARCH", "yes"}}).reason,
            "bad value for WAGGLE_SEARCH: yes");
}

// The two-argument form reads the process's own environment.
TEST_F(ConfigFile, ReadsTheProcessEnvironment) {
  ::setenv("WAGGLE_MAX_NEG_ITEMS", "123", 1);
  node_config from_env;
  auto st = parse_serve_config(from_env, {"--config", write("max-neg-items = 99\n")});
  ::unsetenv("WAGGLE_MAX_NEG_ITEMS");
  ASSERT_TRUE(st.ok()) << st.reason;
  EXPECT_EQ(from_env.max_neg_items, 123u);
}

}  // namespace
}  // namespace waggle
