#pragma once

// The kinds a relay derives from its own tables and signs with its own key:
// NIP-29 group state (39000-39003, from channels and channel_members) and
// NIP-43 membership state (8000, 8001, 13534, 28935, from community_members).
// Nobody else may publish them (event_admission). Exports leave them out and
// imports refuse them (docs/portability.md): another relay's signature cannot
// be carried to this relay's key, and each relay re-derives its own.

#include <cstdint>

#include "messages/proto/nip29.hpp"
#include "messages/proto/nip43.hpp"

namespace waggle::proto {

inline bool is_relay_derived(int32_t kind) {
  return nip29::is_group_state(kind) || nip43::is_relay_state(kind);
}

}  // namespace waggle::proto
