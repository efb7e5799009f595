#pragma once

// Shared by the two halves of the event code: event.cpp (parsing, which checks
// the id) and event_sign.cpp (ids and signatures, which defines it). Internal.

#include "messages/proto/event.hpp"

namespace waggle::proto::detail {

// SHA-256 of the NIP-01 canonical serialisation of `ev`.
void sha256_of_canonical(const event& ev, unsigned char digest[32]);

}  // namespace waggle::proto::detail
