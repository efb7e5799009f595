#include "messages/outcome.hpp"

namespace waggle {

namespace {

struct row {
  bool accepted;
  uint16_t http_status;
};

row row_of(ec code) {
  switch (code) {
    case ec::none: return {true, 200};
    case ec::duplicate: return {true, 200};
    case ec::invalid: return {false, 400};
    case ec::blocked: return {false, 403};
    case ec::restricted: return {false, 403};
    case ec::auth_required: return {false, 401};
    case ec::rate_limited: return {false, 429};
    case ec::unavailable: return {false, 503};
    case ec::internal: return {false, 503};
  }
  return {false, 503};
}

answer make_answer(const status& st) {
  auto r = row_of(st.code);
  answer a;
  a.accepted = r.accepted;
  a.message = st.message();
  a.metric = st.code == ec::none ? std::string_view{"accepted"} : prefix_of(st.code);
  a.http_status = r.http_status;
  return a;
}

}  // namespace

ec code_of(write_outcome outcome) {
  switch (outcome) {
    case write_outcome::stored: return ec::none;
    case write_outcome::duplicate: return ec::duplicate;
    case write_outcome::superseded: return ec::duplicate;
    case write_outcome::rejected: return ec::invalid;
    case write_outcome::refused: return ec::restricted;
    case write_outcome::failed: return ec::unavailable;
    case write_outcome::blocked: return ec::blocked;
    case write_outcome::rate_limited: return ec::rate_limited;
  }
  return ec::unavailable;
}

answer answer_for(const status& st) { return make_answer(st); }

answer answer_for(write_outcome outcome, const std::string& reason) {
  // The reasons an acceptance or a failure is given when the database named none.
  switch (outcome) {
    case write_outcome::stored:
      // Empty but for a removal other nodes did not confirm (the group
      // actor's barrier): the client is told which, as the OK's message.
      return make_answer({ec::none, reason});
    case write_outcome::duplicate:
      return make_answer({ec::duplicate, "already have this event"});
    case write_outcome::superseded:
      return make_answer(
        {ec::duplicate, reason.empty() ? "a newer version of this event is stored" : reason});
    case write_outcome::failed:
      return make_answer({ec::unavailable, reason.empty() ? "database unavailable" : reason});
    case write_outcome::rejected:
    case write_outcome::refused:
    case write_outcome::blocked:
    case write_outcome::rate_limited:
      break;
  }
  return make_answer({code_of(outcome), reason});
}

answer answer_for_policy_reject(std::string_view msg) {
  if (msg.empty())
    return make_answer({ec::blocked, "rejected by write policy"});
  auto colon = msg.find(':');
  auto prefix = colon == std::string_view::npos ? std::string_view{} : msg.substr(0, colon);
  ec code = ec::none;
  for (auto c : {ec::invalid, ec::blocked, ec::restricted, ec::auth_required, ec::rate_limited,
                 ec::unavailable})
    if (prefix == prefix_of(c))
      code = c;
  // NIP-01 prefixes we have no code for: a refusal all the same.
  if (prefix == "duplicate" || prefix == "pow" || prefix == "mute")
    code = ec::blocked;
  if (code == ec::none)
    return make_answer({ec::blocked, std::string{msg}});
  auto a = make_answer({code, ""});
  a.message = std::string{msg};
  return a;
}

}  // namespace waggle
