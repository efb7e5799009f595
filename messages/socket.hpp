#pragma once

// What the gateway hands to the actors: a WebSocket's frames and its end, to
// its connection actor, and a POST /events, to the HTTP submit actor. Each
// struct's `inspect` is beside it; the type IDs are in messages/type_ids.hpp.

#include <cstdint>
#include <string>

#include <caf/meta/type_name.hpp>

namespace waggle {

// -- WebSocket (ws_session -> connection actor) -------------------------------

struct socket_frame {
  std::string text;
};
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, socket_frame& x) {
  return f(caf::meta::type_name("socket_frame"), x.text);
}

struct socket_closed {};
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, socket_closed&) {
  return f(caf::meta::type_name("socket_closed"));
}

// Socket -> connection actor: its outbound queue fell to its low-water mark
// (the answer to socket_sink::notify_drained); frames and bytes that may be
// queued now without nearing the cap. A large history goes out in such slices.
struct socket_drained {
  uint64_t frames = 0;
  uint64_t bytes = 0;
};
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, socket_drained& x) {
  return f(caf::meta::type_name("socket_drained"), x.frames, x.bytes);
}

// A connection actor's timer (to itself) for the history stall rule: its
// queued histories are ended if the socket took no slice of them for
// --history-stall-seconds (actors/connection/history_sender.cpp).
struct history_stall_check {};
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, history_stall_check&) {
  return f(caf::meta::type_name("history_stall_check"));
}

// -- HTTP submit (POST /events) ----------------------------------------------

// Node -> HTTP submit actor: the request as the gateway took it. Its NIP-98
// Authorization is verified on the actor, never on an io thread; the header
// is not recorded in traces (only the pubkey it proves, as http_event_in).
struct http_request_in {
  std::string authorization;
  std::string host;    // the Host header, as sent
  std::string target;  // path and query
  std::string body;
};
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, http_request_in& x) {
  return f(caf::meta::type_name("http_request_in"), x.authorization, x.host, x.target, x.body);
}

// The event NIP-98 let in: what a trace records and a replay sends.
struct http_event_in {
  std::string auth_pubkey;
  std::string text;
};
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, http_event_in& x) {
  return f(caf::meta::type_name("http_event_in"), x.auth_pubkey, x.text);
}

}  // namespace waggle
