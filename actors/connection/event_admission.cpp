#include "actors/connection/event_admission.hpp"

#include <algorithm>

#include "messages/proto/nip29.hpp"
#include "messages/proto/nip42.hpp"
#include "messages/proto/nip43.hpp"
#include "messages/proto/nip40.hpp"
#include "messages/values.hpp"

namespace waggle {

status admit_event(const proto::event& ev, const std::set<std::string>& authed, int64_t now,
                   const admission_policy& policy, bool vouched) {
  if (!vouched && authed.empty())
    return {ec::auth_required, "authenticate with NIP-42 AUTH before publishing"};
  if (ev.kind == auth_kind)
    return {ec::invalid, "kind 22242 is only accepted in AUTH messages"};
  if (!vouched && !authed.contains(ev.pubkey))
    return {ec::restricted, "event pubkey is not authenticated on this connection"};
  if (!vouched
      && (ev.created_at < now - policy.created_at_window
          || ev.created_at > now + policy.created_at_window))
    return {ec::invalid, "created_at is more than " + std::to_string(policy.created_at_window)
                           + " seconds from the relay's clock"};
  // NIP-40: an event that has expired is refused before it costs a signature
  // check; a malformed expiration is refused too rather than read as "never".
  auto expires = proto::expiration_of(ev);
  if (!expires)
    return expires.error();
  if (proto::has_expired(*expires, now))
    return {ec::invalid, "event has expired"};
  if (!proto::verify_signature(ev))
    return {ec::invalid, "bad signature"};
  return {};
}

status check_auth_event(const proto::event& ev, std::string_view challenge,
                        std::string_view host, std::optional<uint16_t> host_port, int64_t now,
                        const admission_policy& policy) {
  if (ev.kind != auth_kind)
    return {ec::invalid, "AUTH event must be kind 22242"};
  auto tag_challenge = proto::first_tag_value(ev, "challenge");
  if (!tag_challenge || *tag_challenge != challenge)
    return {ec::invalid, "AUTH challenge does not match"};
  auto relay = proto::first_tag_value(ev, "relay");
  if (!relay)
    return {ec::invalid, "AUTH relay tag does not name this relay's host"};
  if (auto st = proto::nip42::check_relay_tag(*relay, host, host_port); !st.ok())
    return st;
  if (ev.created_at < now - policy.auth_window || ev.created_at > now + policy.auth_window)
    return {ec::invalid, "AUTH created_at is more than " + std::to_string(policy.auth_window)
                           + " seconds from the relay's clock"};
  if (!proto::verify_signature(ev))
    return {ec::invalid, "bad signature"};
  return {};
}

admission classify_event(const proto::event& ev, const admission_request& req) {
  namespace nip29 = proto::nip29;
  auto refuse = [](status st) { return admission{route::reject, std::move(st), std::nullopt}; };
  if (auto st = admit_event(ev, req.authed, req.now, req.policy, req.vouched); !st.ok())
    return refuse(std::move(st));
  auto channel = nip29::channel_of(ev);
  if (!channel)
    return refuse(channel.error());
  if (nip29::is_group_state(ev.kind) && ev.pubkey != req.relay_pubkey)
    return refuse({ec::restricted, "group state (kinds 39000-39003) is signed by the relay"});
  if (proto::nip43::is_relay_state(ev.kind) && ev.pubkey != req.relay_pubkey)
    return refuse({ec::restricted,
                   "membership state (kinds 8000, 8001, 13534, 28935) is signed by the relay"});
  if (proto::nip43::is_request(ev.kind))
    return {route::membership, {}, std::nullopt};
  if (proto::is_ephemeral(ev.kind)) {
    if (*channel && !req.ephemeral_in_channels)
      return refuse({ec::restricted, "ephemeral channel events are accepted over WebSocket only"});
    return {route::ephemeral, {}, std::move(*channel)};
  }
  if (nip29::is_group_command(ev.kind))
    return {route::group_command, {}, std::move(*channel)};
  return {route::store, {}, std::move(*channel)};
}


}  // namespace waggle
