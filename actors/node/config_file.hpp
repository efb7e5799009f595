#pragma once

// The configuration file of `waggle serve --config FILE`: its syntax, and the
// commented example generated from the option table (docs/waggle.conf.example).
// Its values go through the option table's setters like a flag's or a
// variable's (config.cpp applies them); the file has no parser of values.

#include <cstddef>
#include <string>
#include <vector>

#include "messages/proto/status.hpp"

namespace waggle {

struct config_line {
  std::string key;    // a flag without its "--"
  std::string value;  // the rest of the line, spaces around it trimmed
  size_t number = 0;  // the line's number in the file, from 1
};

// Reads FILE: one `key = value` per line; blank lines and lines whose first
// non-blank character is # are skipped. Refuses, naming the file, the line and
// the key ("FILE:LINE: KEY: why"), a line that is not `key = value`, a key no
// option has and a key given twice; and, naming the file, a file it cannot read.
status read_config_file(const std::string& path, std::vector<config_line>& out);

// "FILE:LINE: KEY: what": how every refusal of a line starts.
std::string config_line_error(const std::string& path, const config_line& line,
                              const std::string& what);

// Every option, its help, flag, variable and default, commented out: the text
// of docs/waggle.conf.example (`waggle serve --print-config-example`).
std::string config_example();

}  // namespace waggle
