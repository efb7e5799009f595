#pragma once

// The option table of `waggle serve` (config_options.cpp): for each setting,
// its documentation and the one function that parses its text into
// node_config, whichever source the text came from (a flag, the environment,
// a --config file), so every source takes the same words and refuses the same.

#include <functional>
#include <string>
#include <vector>

#include "actors/node/config.hpp"

namespace waggle {

// Parses `text` into its field of `cfg`. Returns why the text is not a value
// of the option ("not a number"), or nothing when it is; a refused text leaves
// `cfg` as it was.
using option_setter = std::function<std::string(node_config&, const std::string&)>;

struct serve_option {
  option_doc doc;
  option_setter set;
  // The flag may be given several times, its values adding up (joined by a
  // space, as the environment variable lists them): --read-database-url.
  bool repeatable = false;
};

const std::vector<serve_option>& serve_option_table();

// The key of an option in a --config file: its flag without the "--".
inline std::string config_key(const option_doc& doc) { return doc.flag.substr(2); }

}  // namespace waggle
