#pragma once

// Minimal logging for the gateway (stderr). Debug lines appear only when the
// environment variable WAGGLE_GATEWAY_DEBUG is set.

#include <string_view>

namespace waggle::gateway::log {

bool debug_enabled();
void debug(std::string_view what, std::string_view detail = {});
void warn(std::string_view what, std::string_view detail = {});

}  // namespace waggle::gateway::log
