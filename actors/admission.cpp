#include "actors/admission.hpp"

#include <algorithm>
#include <cctype>

#include "db/community_store.hpp"

namespace waggle {

status admit_event(const proto::event& ev, const std::set<std::string>& authed, int64_t now,
                   const admission_policy& policy) {
  if (authed.empty())
    return {ec::auth_required, "authenticate with NIP-42 AUTH before publishing"};
  if (ev.kind == auth_kind)
    return {ec::invalid, "kind 22242 is only accepted in AUTH messages"};
  if (!authed.contains(ev.pubkey))
    return {ec::restricted, "event pubkey is not authenticated on this connection"};
  if (ev.created_at < now - policy.created_at_window
      || ev.created_at > now + policy.created_at_window)
    return {ec::invalid, "created_at is more than " + std::to_string(policy.created_at_window)
                           + " seconds from the relay's clock"};
  if (!proto::verify_signature(ev))
    return {ec::invalid, "bad signature"};
  return {};
}

status check_auth_event(const proto::event& ev, std::string_view challenge,
                        std::string_view host, int64_t now, const admission_policy& policy) {
  if (ev.kind != auth_kind)
    return {ec::invalid, "AUTH event must be kind 22242"};
  auto tag_challenge = proto::first_tag_value(ev, "challenge");
  if (!tag_challenge || *tag_challenge != challenge)
    return {ec::invalid, "AUTH challenge does not match"};
  auto relay = proto::first_tag_value(ev, "relay");
  if (!relay || host_of_url(*relay) != host)
    return {ec::invalid, "AUTH relay tag does not name this relay's host"};
  if (ev.created_at < now - policy.auth_window || ev.created_at > now + policy.auth_window)
    return {ec::invalid, "AUTH created_at is more than " + std::to_string(policy.auth_window)
                           + " seconds from the relay's clock"};
  if (!proto::verify_signature(ev))
    return {ec::invalid, "bad signature"};
  return {};
}

ok_answer answer_for(db::write_outcome outcome, const std::string& reason) {
  switch (outcome) {
    case db::write_outcome::stored:
      return {true, ""};
    case db::write_outcome::duplicate:
      return {true, "duplicate: already have this event"};
    case db::write_outcome::superseded:
      return {true, "duplicate: " + (reason.empty()
                                       ? std::string{"a newer version of this event is stored"}
                                       : reason)};
    case db::write_outcome::rejected:
      return {false, status{ec::invalid, reason}.message()};
    case db::write_outcome::refused:
      return {false, status{ec::restricted, reason}.message()};
    case db::write_outcome::failed:
      break;
  }
  return {false, status{ec::unavailable, reason.empty() ? "database unavailable" : reason}.message()};
}

std::string host_of_url(std::string_view url) {
  if (auto scheme = url.find("://"); scheme != std::string_view::npos)
    url.remove_prefix(scheme + 3);
  url = url.substr(0, std::min(url.find('/'), url.find('?')));
  return db::normalize_host(url);
}

}  // namespace waggle
