#pragma once

// The gateway's log calls, through the observer the node gave it (component
// "gateway" in the node's structured log; debug lines appear with
// --log-level debug). Without an observer (unit tests) they are dropped.

#include <string_view>

#include "gateway/node_api.hpp"

namespace waggle::gateway::log {

inline void debug(const node_api& api, std::string_view what, std::string_view detail = {}) {
  if (api.watch && api.watch->logs(log_level::debug))
    api.watch->log(log_level::debug, what, detail);
}

inline void warn(const node_api& api, std::string_view what, std::string_view detail = {}) {
  if (api.watch)
    api.watch->log(log_level::warn, what, detail);
}

}  // namespace waggle::gateway::log
