#pragma once

// "--flag value" or "--flag=value", taken out of a `waggle` command's
// arguments (the rest stay, in order): the one way every subcommand reads
// its flags.

#include <optional>
#include <string>
#include <vector>

namespace waggle {

inline std::optional<std::string> take_flag(std::vector<std::string>& args,
                                            const std::string& flag) {
  for (size_t i = 0; i < args.size(); ++i) {
    const auto at = args.begin() + static_cast<std::ptrdiff_t>(i);
    if (args[i] == flag && i + 1 < args.size()) {
      auto v = args[i + 1];
      args.erase(at, at + 2);
      return v;
    }
    if (args[i].rfind(flag + "=", 0) == 0) {
      auto v = args[i].substr(flag.size() + 1);
      args.erase(at);
      return v;
    }
  }
  return std::nullopt;
}

inline std::string take_flag(std::vector<std::string>& args, const std::string& flag,
                             std::string fallback) {
  return take_flag(args, flag).value_or(std::move(fallback));
}

}  // namespace waggle
