#include "gateway/log.hpp"

#include <cstdio>
#include <cstdlib>
#include <string>

namespace waggle::gateway::log {

bool debug_enabled() {
  static const bool enabled = std::getenv("WAGGLE_GATEWAY_DEBUG") != nullptr;
  return enabled;
}

namespace {
void emit(const char* level, std::string_view what, std::string_view detail) {
  std::string line = "[gateway] ";
  line += level;
  line += ' ';
  line += what;
  if (!detail.empty()) {
    line += ": ";
    line += detail;
  }
  line += '\n';
  std::fwrite(line.data(), 1, line.size(), stderr);  // one write: lines do not interleave
}
}  // namespace

void debug(std::string_view what, std::string_view detail) {
  if (debug_enabled())
    emit("debug", what, detail);
}

void warn(std::string_view what, std::string_view detail) { emit("warn", what, detail); }

}  // namespace waggle::gateway::log
