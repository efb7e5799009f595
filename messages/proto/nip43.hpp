#pragma once

// NIP-43 (relay access metadata and requests): the kinds, and who may send
// them. What the relay does with them is in docs/communities.md.

#include <cstdint>
#include <optional>
#include <string>

#include "messages/proto/event.hpp"

namespace waggle::proto::nip43 {

constexpr int32_t kind_member_added = 8000;       // relay-signed, `p`
constexpr int32_t kind_member_removed = 8001;     // relay-signed, `p`
constexpr int32_t kind_membership_list = 13534;   // relay-signed, one `member` per member
constexpr int32_t kind_join_request = 28934;      // user, `claim`
constexpr int32_t kind_invite = 28935;            // relay-signed, `claim`; never stored
constexpr int32_t kind_leave_request = 28936;     // user

// Kinds only the relay signs: anyone else's are refused.
inline bool is_relay_state(int32_t k) {
  return k == kind_member_added || k == kind_member_removed || k == kind_membership_list
         || k == kind_invite;
}

// Requests the relay answers instead of storing them.
inline bool is_request(int32_t k) { return k == kind_join_request || k == kind_leave_request; }

// The first `claim` tag's value of a join request.
std::optional<std::string> claim_of(const event& ev);

// A relay-signed invite: kind 28935, ["-"], ["claim", code].
event make_invite(const std::string& code, int64_t now, const std::string& relay_secret);

}  // namespace waggle::proto::nip43
