#include "messages/register_types.hpp"

#include <caf/actor_system_config.hpp>

#include "messages/type_ids.hpp"

namespace waggle {

void register_types(caf::actor_system_config& cfg) {
  cfg.add_message_types<caf::id_block::waggle>();
}

}  // namespace waggle
