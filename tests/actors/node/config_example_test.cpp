// docs/waggle.conf.example and the options table of docs/operations.md
// against the option table they document: the example is generated from it
// and must be the checked-in file, parse as is, and give the defaults when
// every setting in it is uncommented.

#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <string>

#include "actors/node/config.hpp"
#include "actors/node/config_file.hpp"
#include "actors/node/config_options.hpp"
#include "tests/support/test_paths.hpp"

namespace waggle {
namespace {

namespace fs = std::filesystem;

std::string read_file(const fs::path& path) {
  std::ifstream in{path, std::ios::binary};
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

fs::path source(const std::string& relative) { return fs::path{test_paths::source_dir} / relative; }

class ConfigExample : public ::testing::Test {
 protected:
  void SetUp() override {
    auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = fs::temp_directory_path()
           / ("waggle-example-" + std::to_string(::getpid()) + "-" + info->name());
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // `text` as a --config file, with no environment and no other flag.
  status parse(const std::string& text, node_config& cfg) {
    auto path = (dir_ / "waggle.conf").string();
    std::ofstream{path, std::ios::binary} << text;
    return parse_serve_config(cfg, {"--config", path}, {});
  }

  fs::path dir_;
};

// The first line where two texts differ (from 1), with both versions of it.
std::string first_difference(const std::string& a, const std::string& b) {
  std::istringstream in_a{a}, in_b{b};
  std::string line_a, line_b;
  for (size_t number = 1;; ++number) {
    bool more_a = static_cast<bool>(std::getline(in_a, line_a));
    bool more_b = static_cast<bool>(std::getline(in_b, line_b));
    if (!more_a && !more_b)
      return "none";
    if (more_a != more_b || line_a != line_b)
      return "line " + std::to_string(number) + ":\n  checked in: "
             + (more_a ? line_a : "(end of file)") + "\n  generated:  "
             + (more_b ? line_b : "(end of file)");
  }
}

TEST_F(ConfigExample, TheCheckedInExampleIsCurrent) {
  auto checked_in = read_file(source("docs/waggle.conf.example"));
  auto generated = config_example();
  EXPECT_TRUE(checked_in == generated)
      << "docs/waggle.conf.example differs from the option table "
         "(actors/node/config_options.cpp) at " << first_difference(checked_in, generated)
      << "\nRegenerate it from the build tree:\n"
         "  ./build/release/waggle serve --print-config-example > docs/waggle.conf.example";
}

// As generated, every setting is a comment: the file parses and changes nothing.
TEST_F(ConfigExample, TheExampleParsesAndSetsNothing) {
  node_config from_example, defaults;
  auto st = parse(config_example(), from_example);
  ASSERT_TRUE(st.ok()) << st.reason;
  ASSERT_TRUE(parse_serve_config(defaults, {}, {}).ok());
  EXPECT_TRUE(from_example == defaults);
}

// Every option once, as `#key = default`: uncommented, each key is known
// (the file would refuse it otherwise) and the result is the defaults.
TEST_F(ConfigExample, UncommentingEverySettingYieldsTheDefaults) {
  std::istringstream lines{config_example()};
  std::string uncommented;
  std::set<std::string> keys;
  static const std::regex setting{R"(^#([a-z0-9-]+) =.*$)"};
  for (std::string line; std::getline(lines, line);) {
    std::smatch m;
    if (std::regex_match(line, m, setting)) {
      EXPECT_TRUE(keys.insert(m[1]).second) << m[1] << " is in the example twice";
      line.erase(0, 1);
    }
    uncommented += line + "\n";
  }
  for (auto& o : serve_option_table())
    EXPECT_TRUE(keys.count(config_key(o.doc))) << o.doc.flag << " is not in the example";
  EXPECT_EQ(keys.size(), serve_option_table().size());

  node_config from_example, defaults;
  auto st = parse(uncommented, from_example);
  ASSERT_TRUE(st.ok()) << st.reason;
  ASSERT_TRUE(parse_serve_config(defaults, {}, {}).ok());
  EXPECT_TRUE(from_example == defaults);
}

// What the table says an option's default is, is what node_config holds: the
// example, --help and the docs show the table's.
TEST_F(ConfigExample, EveryDocumentedDefaultIsTheFieldsDefault) {
  for (auto& o : serve_option_table()) {
    node_config cfg;
    EXPECT_EQ(o.set(cfg, o.doc.default_value), "") << o.doc.flag;
    EXPECT_TRUE(cfg == node_config{}) << o.doc.flag << ": its default \"" << o.doc.default_value
                                      << "\" is not the field's default in node_config";
  }
}

// The hand-written table of docs/operations.md explains more than --help
// does; it must still list every option (and no option that is gone).
TEST_F(ConfigExample, TheOperationsTableListsEveryOption) {
  auto doc = read_file(source("docs/operations.md"));
  auto start = doc.find("## Settings of `waggle serve`");
  ASSERT_NE(start, std::string::npos) << "docs/operations.md has no settings section";
  auto table = doc.substr(start, doc.find("\n## ", start + 1) - start);
  for (auto& o : serve_option_table()) {
    EXPECT_NE(table.find("`" + o.doc.flag + "`"), std::string::npos)
        << o.doc.flag << " is not in the settings table of docs/operations.md";
    EXPECT_NE(table.find("`" + o.doc.env + "`"), std::string::npos)
        << o.doc.env << " is not in the settings table of docs/operations.md";
  }
  static const std::regex row_flag{R"(\n\| `(--[a-z0-9-]+)`)"};
  for (std::sregex_iterator it{table.begin(), table.end(), row_flag}, end; it != end; ++it) {
    auto flag = (*it)[1].str();
    bool known = flag == "--config";
    for (auto& o : serve_option_table())
      known = known || o.doc.flag == flag;
    EXPECT_TRUE(known) << "docs/operations.md lists " << flag << ", which waggle serve lacks";
  }
}

}  // namespace
}  // namespace waggle
