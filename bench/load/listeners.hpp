#pragma once

// Operator listeners for the listener workloads: their keys, the relay's
// `--operator-listeners` value naming the tool's receivers, and the NIP-98
// registration of targets (docs/delivery.md, "Registration").

#include <cstdint>
#include <string>
#include <vector>

#include "bench/load/events.hpp"
#include "bench/load/setup.hpp"

namespace waggle::bench {

// Listener i's key: derived from i, so the script and every run agree on it
// without passing secrets around (a benchmark key, never a real one).
keypair listener_key(size_t i);

// `<pubkey>=http://127.0.0.1:<port>/wake,...`, listener i on ports[i].
std::string listener_config(const std::vector<uint16_t>& ports);

// Registers `targets` for listener `key` in the relay's community (its Host),
// 1,000 a call; "" or what failed.
std::string register_targets(const relay_endpoint& relay, const keypair& key,
                             const std::vector<std::string>& targets);

}  // namespace waggle::bench
