#pragma once

// The committed traces as lines, for tests that replay them as recorded or
// edited (a record moved, an answer changed) to show where a replay diverges.

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "actors/replay/trace_replay.hpp"
#include "tests/support/test_paths.hpp"

namespace waggle::testing {

inline std::filesystem::path traces_dir() {
  return std::filesystem::path{waggle::test_paths::source_dir} / "tests" / "traces";
}

inline std::vector<std::string> read_lines(const std::filesystem::path& p) {
  std::ifstream in{p};
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);)
    lines.push_back(line);
  return lines;
}

inline replay_outcome replay_lines(const std::vector<std::string>& lines,
                                   replay_options options = {}) {
  std::stringstream ss;
  for (const auto& l : lines)
    ss << l << "\n";
  return replay_trace(ss, options);
}

}  // namespace waggle::testing
