#include "messages/proto/push.hpp"

#include <algorithm>
#include <charconv>

#include "messages/proto/json_detail.hpp"
#include "messages/proto/nip98.hpp"

namespace waggle::proto::push {

namespace {

status bad(std::string reason) { return make_status(ec::invalid, "push lease: " + std::move(reason)); }

std::optional<int64_t> parse_integer(std::string_view s) {
  if (s.empty() || s.size() > 18)
    return std::nullopt;
  int64_t v = 0;
  auto [p, err] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (err != std::errc() || p != s.data() + s.size() || v < 0)
    return std::nullopt;
  return v;
}

bool installation_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
         c == '-';
}

}  // namespace

bool is_push_kind(int32_t kind) {
  return kind == 9 || kind == 40002 || kind == 45001 || kind == 45003;
}

result<lease> parse_lease(const event& ev, int64_t now, const lease_limits& lim) {
  if (ev.kind != kind_lease)
    return bad("not a kind 30350 event");
  lease l;
  bool have_d = false, have_endpoint = false, have_app = false, have_exp = false,
       have_generation = false;
  for (const auto& t : ev.tags) {
    if (t.size() < 2)
      continue;
    const auto& name = t[0];
    const auto& value = t[1];
    if (name == "d" && !have_d) {
      have_d = true;
      l.installation_id = value;
    } else if (name == "endpoint" && !have_endpoint) {
      have_endpoint = true;
      l.endpoint_grant = value;
    } else if (name == "app" && !have_app) {
      have_app = true;
      l.app = value;
    } else if (name == "expiration" && !have_exp) {
      have_exp = true;
      auto v = parse_integer(value);
      if (!v)
        return bad("expiration is not a unix time");
      l.expires_at = *v;
    } else if (name == "generation" && !have_generation) {
      have_generation = true;
      auto v = parse_integer(value);
      if (!v || *v < 1)
        return bad("generation must be an integer of at least 1");
      l.generation = *v;
    } else if (name == "channel") {
      l.channels.push_back(value);
    } else if (name == "mute") {
      l.mutes.push_back(value);
    } else if (name == "k") {
      auto v = parse_integer(value);
      if (!v || !is_push_kind(static_cast<int32_t>(*v)))
        return bad("k must name a push kind (9, 40002, 45001, 45003)");
      l.kinds.push_back(static_cast<int32_t>(*v));
    }
  }
  if (l.installation_id.empty() || l.installation_id.size() > 64 ||
      !std::all_of(l.installation_id.begin(), l.installation_id.end(), installation_char))
    return bad("d must be an installation id of 1 to 64 letters, digits, '_' or '-'");
  // Stored as text: PostgreSQL cannot hold a NUL character.
  for (const auto* v : {&l.endpoint_grant, &l.app})
    if (v->find('\0') != std::string::npos)
      return bad("endpoint and app must not contain NUL");
  if (l.endpoint_grant.empty() || l.endpoint_grant.size() > 512)
    return bad("endpoint must be a grant of 1 to 512 bytes");
  if (l.app.empty() || l.app.size() > 64)
    return bad("app must be 1 to 64 bytes");
  if (!have_exp)
    return bad("expiration is required");
  if (l.expires_at <= now)
    return bad("already expired");
  if (l.expires_at > now + lim.max_lifetime_seconds)
    return bad("expiration is too far ahead");
  if (!have_generation)
    return bad("generation is required");
  if (l.channels.size() > lim.max_channels || l.mutes.size() > lim.max_channels)
    return bad("too many channel or mute tags");
  // The shape of a channel id (migrations/0002): lists of them are stored
  // and read back comma-joined.
  auto channel_char = [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
  };
  for (const auto* list : {&l.channels, &l.mutes})
    for (const auto& c : *list)
      if (c.empty() || c.size() > 64 || !std::all_of(c.begin(), c.end(), channel_char))
        return bad("channel and mute name channel ids ([a-z0-9_-]{1,64})");
  std::sort(l.kinds.begin(), l.kinds.end());
  l.kinds.erase(std::unique(l.kinds.begin(), l.kinds.end()), l.kinds.end());
  l.endpoint_hash = sha256_hex(l.endpoint_grant);
  return l;
}

std::vector<wake_request> match_wakes(const std::vector<match_event>& events,
                                      const std::vector<match_lease>& leases,
                                      const std::vector<readable_pair>* readable) {
  auto contains = [](const auto& list, const auto& v) {
    return std::find(list.begin(), list.end(), v) != list.end();
  };
  std::vector<wake_request> out;
  for (size_t e = 0; e < events.size(); ++e) {
    const auto& ev = events[e];
    if (!is_push_kind(ev.kind))
      continue;
    for (size_t k = 0; k < leases.size(); ++k) {
      const auto& l = leases[k];
      if (l.author == ev.author)
        continue;
      if (!l.kinds.empty() && !contains(l.kinds, ev.kind))
        continue;
      if (!l.channels.empty() && (!ev.channel || !contains(l.channels, *ev.channel)))
        continue;
      if (ev.channel && contains(l.mutes, *ev.channel))
        continue;
      if (readable &&
          !std::binary_search(readable->begin(), readable->end(), readable_pair{e, l.author}))
        continue;
      out.push_back({e, k});
    }
  }
  return out;
}

std::string gateway_body(std::string_view request_id, std::string_view endpoint_grant,
                         int64_t expires_at, std::string_view community,
                         std::string_view event_id) {
  std::string out = R"({"v":1,"request_id":)";
  detail::append_json_string(out, request_id);
  out += R"(,"endpoint_grant":)";
  detail::append_json_string(out, endpoint_grant);
  out += R"(,"expires_at":)";
  detail::append_int(out, expires_at);
  out += R"(,"community":)";
  detail::append_json_string(out, community);
  out += R"(,"event_id":)";
  detail::append_json_string(out, event_id);
  out += '}';
  return out;
}

}  // namespace waggle::proto::push
