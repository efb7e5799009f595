#include "messages/proto/nip43.hpp"

namespace waggle::proto::nip43 {

std::optional<std::string> claim_of(const event& ev) {
  if (auto v = first_tag_value(ev, "claim"))
    return std::string(*v);
  return std::nullopt;
}

event make_invite(const std::string& code, int64_t now, const std::string& relay_secret) {
  event ev;
  ev.kind = kind_invite;
  ev.created_at = now;
  ev.tags = {{"-"}, {"claim", code}};
  sign(ev, relay_secret);
  return ev;
}

}  // namespace waggle::proto::nip43
