#include "messages/register_types.hpp"

#include <caf/actor_system_config.hpp>
#include <caf/message.hpp>

#include "messages/bus.hpp"
#include "messages/type_ids.hpp"

namespace waggle {

void register_types(caf::actor_system_config& cfg) {
  cfg.add_message_types<caf::id_block::waggle>();
  // (CAF 0.17's add_error_category<T> does not compile: the renderer by hand.)
  cfg.add_error_category(caf::atom("bus"),
                         [](uint8_t code, caf::atom_value, const caf::message& context) {
                           std::string out = "bus: ";
                           out += to_string(static_cast<bus_errc>(code));
                           if (!context.empty())
                             out += " (" + caf::to_string(context) + ")";
                           return out;
                         });
}

}  // namespace waggle
