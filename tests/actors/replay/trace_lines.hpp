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

// Sequence numbers again from 1 in file order, after a test inserted or removed
// records (each record's "seq" is its first field; line 0 is the header).
inline std::vector<std::string> renumbered(std::vector<std::string> lines) {
  for (size_t i = 1; i < lines.size(); ++i) {
    auto comma = lines[i].find(',');
    lines[i] = "{\"seq\":" + std::to_string(i) + lines[i].substr(comma);
  }
  return lines;
}

}  // namespace waggle::testing
