#pragma once

// The gateway's log calls, on the node's structured logger (component
// "gateway"; debug lines appear with --log-level debug).

#include <string>
#include <string_view>

#include "actors/log.hpp"

namespace waggle::gateway::log {

inline void debug(std::string_view what, std::string_view detail = {}) {
  waggle::log::debug("gateway", what, {{"detail", std::string{detail}}});
}

inline void warn(std::string_view what, std::string_view detail = {}) {
  waggle::log::warn("gateway", what, {{"detail", std::string{detail}}});
}

}  // namespace waggle::gateway::log
