#include "messages/bus.hpp"

#include <caf/message.hpp>

namespace waggle {

bool bus_valid_name(std::string_view name) {
  if (name.empty() || name.size() > bus_max_subject)
    return false;
  for (unsigned char c : name)
    if (c < 0x21 || c > 0x7e)
      return false;
  return true;
}

uint64_t bus_subject_hash(std::string_view subject) {
  // FNV-1a, 64 bit: offset basis and prime as published by Fowler, Noll and Vo.
  uint64_t h = 14695981039346656037ull;
  for (unsigned char c : subject) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

uint32_t bus_shard_of(std::string_view subject) {
  return static_cast<uint32_t>(bus_subject_hash(subject) % bus_shard_count);
}

const char* to_string(bus_errc code) {
  switch (code) {
    case bus_errc::bad_subject: return "bad_subject";
    case bus_errc::payload_too_large: return "payload_too_large";
    case bus_errc::no_responders: return "no_responders";
    case bus_errc::request_timeout: return "request_timeout";
    case bus_errc::unavailable: return "unavailable";
    case bus_errc::bad_group: return "bad_group";
    case bus_errc::overloaded: return "overloaded";
  }
  return "unknown";
}

bool bus_error_is(const caf::error& err, bus_errc code) {
  return err.category() == caf::atom("bus") && err.code() == static_cast<uint8_t>(code);
}

caf::error make_error(bus_errc code, std::string context) {
  if (context.empty())
    return caf::error{static_cast<uint8_t>(code), caf::atom("bus")};
  return caf::error{static_cast<uint8_t>(code), caf::atom("bus"),
                    caf::make_message(std::move(context))};
}

}  // namespace waggle

namespace waggle {

namespace {

caf::error check_subject(const std::string& subject, const char* what) {
  if (!bus_valid_name(subject))
    return make_error(bus_errc::bad_subject,
                      std::string{what} + " must be 1-" + std::to_string(bus_max_subject) +
                        " bytes of visible ASCII");
  return {};
}

caf::error check_payload(const std::string& payload) {
  if (payload.size() > bus_max_payload)
    return make_error(bus_errc::payload_too_large,
                      std::to_string(payload.size()) + " bytes, the limit is " +
                        std::to_string(bus_max_payload));
  return {};
}

}  // namespace

caf::error bus_validate(const bus_publish& x) {
  if (auto err = check_subject(x.subject, "subject"))
    return err;
  if (!x.reply_to.empty())
    if (auto err = check_subject(x.reply_to, "reply_to"))
      return err;
  return check_payload(x.payload);
}

caf::error bus_validate(const bus_subscribe& x) {
  if (auto err = check_subject(x.subject, "subject"))
    return err;
  if (!x.group.empty() && !bus_valid_name(x.group))
    return make_error(bus_errc::bad_group, "a queue group must be 1-" +
                                             std::to_string(bus_max_subject) +
                                             " bytes of visible ASCII");
  if (!x.subscriber)
    return make_error(bus_errc::bad_subject, "no subscriber");
  return {};
}

caf::error bus_validate(const bus_request& x) {
  if (auto err = check_subject(x.subject, "subject"))
    return err;
  return check_payload(x.payload);
}

}  // namespace waggle
