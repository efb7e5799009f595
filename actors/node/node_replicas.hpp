#pragma once

// The node's replica routing, built once from its configuration: one pool per
// --read-database-url (lazy: a reader down at boot neither stops nor delays
// the node), registered with the metrics (docs/replicas.md).

#include <memory>

#include "actors/node/config.hpp"
#include "actors/reads/heartbeat_ring.hpp"
#include "actors/reads/replica_route.hpp"
#include "actors/support/env.hpp"

namespace waggle {

std::shared_ptr<route_context> make_routing(const node_config& cfg, const node_env& env,
                                            std::shared_ptr<heartbeat_ring> ring);

}  // namespace waggle
