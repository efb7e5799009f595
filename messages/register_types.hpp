#pragma once

// Adds the node's type-ID block (messages/type_ids.hpp) to an actor system's
// config; call before constructing the actor_system. Declared apart from the
// block so that what starts a system needs none of the block's templates.

#include <caf/fwd.hpp>

namespace waggle {

void register_types(caf::actor_system_config& cfg);

}  // namespace waggle
