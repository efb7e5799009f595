#include "messages/proto/status.hpp"

namespace waggle {

std::string_view prefix_of(ec code) {
  switch (code) {
    case ec::none: return "";
    case ec::invalid: return "invalid";
    case ec::duplicate: return "duplicate";
    case ec::blocked: return "blocked";
    case ec::restricted: return "restricted";
    case ec::auth_required: return "auth-required";
    case ec::rate_limited: return "rate-limited";
    case ec::unavailable: return "error";
    case ec::internal: return "error";
  }
  return "error";
}

std::string status::message() const {
  if (code == ec::none)
    return reason;
  std::string out{prefix_of(code)};
  out += ": ";
  out += reason;
  return out;
}

}  // namespace waggle
