#pragma once

// Shared by the two halves of the NIP-29 code: nip29.cpp (command parsing,
// which defines it) and nip29_rules.cpp (the membership and permission rules).
// Internal. Not `detail`: inside nip29 that name would hide proto::detail.

#include <string>

#include "messages/proto/status.hpp"

namespace waggle::proto::nip29::internal {

// An ec::invalid status with `reason`.
status invalid(std::string reason);

}  // namespace waggle::proto::nip29::internal
