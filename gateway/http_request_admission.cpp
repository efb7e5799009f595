// http_session's admission: who the client is and whether it may be served.
// Kept apart from routing (http_session.cpp) because it is policy, not HTTP.

#include "gateway/http_session.hpp"

#include "gateway/ws_session.hpp"

namespace waggle::gateway {

namespace http = boost::beast::http;

namespace {
constexpr const char* text_plain = "text/plain; charset=utf-8";
}

bool http_session::is_node_path(std::string_view path) const {
  return path == "/healthz" || path == "/readyz" || path == "/metrics";
}

void http_session::refuse(http::status status, std::string_view label, std::string body) {
  close_after_ = true;  // and at once, with its slot (close_now)
  if (st_->api.watch)
    st_->api.watch->refused(label);
  auto res = make(status, text_plain, std::move(body));
  if (status == http::status::too_many_requests || status == http::status::service_unavailable)
    res.set(http::field::retry_after, "1");
  send(std::move(res), true);
}

bool http_session::admit_request(std::string_view path) {
  // A trusted proxy speaks for its client: X-Forwarded-For names it, and it
  // is that address that is capped, blocked (NIP-86) and shown to policy.
  if (admission_ == admission::open && is_trusted_proxy(peer_ip_, st_->trusted)) {
    // Every X-Forwarded-For line, in order: a proxy that appends its own
    // line (rather than extending the client's) must not let the client's
    // first line speak for it (RFC 9110 §5.3: lines of one field combine).
    std::string forwarded;
    for (auto [it, end] = req_.equal_range("X-Forwarded-For"); it != end; ++it) {
      if (!forwarded.empty())
        forwarded += ", ";
      forwarded += std::string(it->value());
    }
    remote_ip_ = effective_client_ip(peer_ip_, forwarded, st_->trusted);
    auto v = slot_->move_ip(remote_ip_);
    if (v == ip_table::verdict::too_many)
      admission_ = admission::too_many;
    else if (v == ip_table::verdict::too_fast)
      admission_ = admission::too_fast;
  }
  if (admission_ == admission::open)
    return true;
  // Restricted: the health endpoints always answer (once), nothing else.
  close_after_ = true;
  if (is_node_path(path))
    return true;
  switch (admission_) {
    case admission::too_many:
      refuse(http::status::too_many_requests, "connections_per_ip",
             "too many connections from your address (max "
               + std::to_string(st_->limits.max_connections_per_ip) + "), retry later\n");
      break;
    case admission::too_fast:
      refuse(http::status::too_many_requests, "connection_rate",
             "too many new connections from your address, slow down\n");
      break;
    default:
      refuse(http::status::service_unavailable, "tcp_saturated",
             "the relay is at its connection limit, retry later\n");
  }
  return false;
}

bool http_session::reserve_websocket() {
  if (st_->ws_count.fetch_add(1) >= st_->limits.max_connections) {
    st_->ws_count.fetch_sub(1);
    refuse(http::status::service_unavailable, "max_connections",
           "too many connections, retry later\n");
    return false;
  }
  // Unauthenticated sockets have a cap of their own below the total, so a
  // flood of them leaves room for clients that do authenticate. At the cap
  // the newcomer takes the place of the oldest one instead (it has had at
  // least unauth_evict_age to AUTH): else a flood from many addresses that
  // keeps the cap full would lock every newcomer out, however fast it AUTHs.
  if (st_->unauth_count.fetch_add(1) >= st_->limits.unauthenticated_cap()
      && !evict_oldest_unauthenticated()) {
    st_->unauth_count.fetch_sub(1);
    st_->ws_count.fetch_sub(1);
    refuse(http::status::service_unavailable, "unauthenticated_cap",
           "too many unauthenticated connections, retry later\n");
    return false;
  }
  return true;
}

bool http_session::evict_oldest_unauthenticated() {
  const auto cutoff = std::chrono::steady_clock::now() - st_->limits.unauth_evict_age;
  // The victim is out of the queue from here on, so no two newcomers take
  // the same place; it gives its unauthenticated slot back on its strand
  // (ws_session::evict_unauthenticated), or has already, if it
  // authenticated meanwhile or is gone.
  auto victim = st_->unauth_sessions.take_oldest(cutoff);
  if (victim.expired())
    return false;
  st_->gate->post_to(victim, [](ws_session& s) { s.evict_unauthenticated(); });
  return true;
}

}  // namespace waggle::gateway
