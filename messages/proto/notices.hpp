#pragma once

// The NOTICEs the gateway sends on its own, each before it closes a socket
// with 1008 (docs/actor-rules.md, rule 8): the gateway decides when, the text
// is here with the rest of the protocol's, its prefix from the one table
// (status.hpp).

#include <chrono>
#include <string>

namespace waggle::proto {

// The socket's outbound queue overflowed: its connection actor is not asked,
// since its frames are what overflowed.
std::string slow_consumer_notice();

// No NIP-42 AUTH within `deadline` of connecting.
std::string auth_deadline_notice(std::chrono::seconds deadline);

// The oldest unauthenticated socket, evicted to make room for a newer one.
std::string unauthenticated_evicted_notice();

}  // namespace waggle::proto
