#pragma once

// Outbound HTTP for the delivery slots (docs/delivery.md): one POST per
// call, plain http:// or https:// (certificates verified against the
// system's store, SNI set), a deadline over the whole exchange (resolve,
// connect, TLS, write, read), redirects never followed (a 3xx is returned as
// it came), and a capped response body (the status is what matters).
// Connections are kept alive per origin (scheme, host, port) and reused by
// the next POST there: a wake then costs one write and one read, not a
// connect (and a TLS handshake). A kept connection that fails before any
// byte of the answer (its peer closed it as the request went out) is
// replaced once by a new one, so the request may reach a listener twice:
// deliveries are at least once, under one delivery id. The client runs its
// own io thread; `done` is called exactly once, from that thread, so
// callers hand the result to an actor with a message.

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace waggle::gateway {

struct http_post {
  std::string url;  // http://host[:port]/path?query or https://...
  std::vector<std::pair<std::string, std::string>> headers;  // besides Host, Content-Length, User-Agent
  std::string body;
  std::string content_type = "application/json";
  std::chrono::milliseconds timeout{5000};
};

struct http_result {
  uint16_t status = 0;  // 0: no HTTP answer (see error)
  std::string error;    // why there was no answer: "timeout", "connect: ...", "tls: ...", "bad url: ..."
  std::string location; // the Location header of a 3xx (reported, never followed)
  // Also "resolve: ...", "write: ...", "read: ..." (before a status line;
  // after one, the status stands whatever happens to the body), "bad header"
  // (a name that is no token, a CR/LF/NUL in a value, or one of Host,
  // Content-Length, Transfer-Encoding, Connection, User-Agent, Content-Type,
  // which the client sets itself) and "stopped". The peer's text reaches
  // only `location` (at most the 16 KiB header cap): escape it before a log.
};

class http_client {
 public:
  virtual ~http_client() = default;
  virtual void post(http_post request, std::function<void(http_result)> done) = 0;
};

// The Beast client. Stopping it (the destructor) fails every exchange still
// in flight with error "stopped". From any other thread the destructor joins
// the client's io thread: every `done` has run when it returns. Destroyed on a
// client's io thread (inside a `done`, of this client or another), it cannot
// wait: the thread ends on its own and is joined later, at the latest at
// exit, and its "stopped" callbacks may run after the destructor returned,
// even while the process exits.
std::shared_ptr<http_client> make_http_client();

// For tests: certificates (PEM) trusted besides the system's store, so an
// https exchange can be checked end to end against a local server.
struct http_client_options {
  std::string extra_ca_pem;
};
std::shared_ptr<http_client> make_http_client(http_client_options options);

// Parsed form of an http(s) URL; nullopt when it is not one we can POST to
// (another scheme, no host, a port outside 1..65535, userinfo, a fragment).
struct http_url {
  bool tls = false;
  std::string host;   // as written (IPv6 without brackets)
  uint16_t port = 0;  // 80 / 443 when absent
  std::string target; // path and query, "/" when absent
};
std::optional<http_url> parse_http_url(std::string_view url);

}  // namespace waggle::gateway
