#pragma once

// The committed traces as lines, for tests that replay them as recorded or
// edited (a record moved, an answer changed) to show where a replay diverges.

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

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

// The line index of the first record at or after `from` with all of `parts`
// (0, and a test failure, when there is none).
inline size_t find_line(const std::vector<std::string>& lines, std::vector<std::string> parts,
                        size_t from = 1) {
  for (size_t i = from; i < lines.size(); ++i) {
    bool all = true;
    for (auto& p : parts)
      all = all && lines[i].find(p) != std::string::npos;
    if (all)
      return i;
  }
  ADD_FAILURE() << "no record with " << parts.front();
  return 0;
}

}  // namespace waggle::testing
