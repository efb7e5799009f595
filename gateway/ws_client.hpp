#pragma once

// Small synchronous HTTP and WebSocket clients: `waggle sync` talks to
// another relay with them, and the tests to a running node. Plain ws:// and
// http:// only. Not thread-safe: one thread drives one client. Nothing here throws on
// network errors: failures are reported through return values and error().

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace waggle::gateway {

using header_list = std::vector<std::pair<std::string, std::string>>;

struct http_response {
  unsigned status = 0;  // 0 when no response was received (see error)
  std::string body;
  header_list headers;
  std::string error;
  // First header with this name (case-insensitive), "" when absent.
  std::string header(std::string_view name) const;
};

// One request on a fresh connection (Connection: close). `headers` may
// override Host (default "<host>:<port>"). Content-Length is set from `body`.
http_response http_request(const std::string& host, uint16_t port, const std::string& method,
                           const std::string& target, const header_list& headers = {},
                           const std::string& body = {},
                           std::chrono::milliseconds timeout = std::chrono::seconds(10));

class ws_client {
 public:
  ws_client();
  ~ws_client();
  ws_client(const ws_client&) = delete;
  ws_client& operator=(const ws_client&) = delete;

  // Connects and performs the WebSocket handshake on `target`, sending
  // `host_header` as Host (default "<host>:<port>"). On failure returns false;
  // error() says why and, if the server answered the upgrade with an HTTP
  // error, rejected_status() holds that status.
  bool connect(const std::string& host, uint16_t port, const std::string& host_header = {},
               const std::string& target = "/",
               std::chrono::milliseconds timeout = std::chrono::seconds(10));
  // Extra headers of the upgrade requests of later connect() calls (e.g.
  // X-Forwarded-For, as a proxy would add it).
  void set_headers(header_list headers);
  bool send_text(std::string_view text,
                 std::chrono::milliseconds timeout = std::chrono::seconds(10));
  // The next message, or nullopt on timeout or when the socket ended (then
  // is_open() is false and close_code() holds the peer's close code, if any).
  // A timed-out read stays pending and is picked up by the next call.
  std::optional<std::string> read_text(std::chrono::milliseconds timeout);
  // Sends a close frame and waits (up to `timeout`) for the peer's.
  void close(uint16_t code = 1000, std::chrono::milliseconds timeout = std::chrono::seconds(5));

  bool is_open() const;
  uint16_t close_code() const;   // the peer's close code, 0 if none received
  unsigned rejected_status() const;
  const std::string& error() const;

 private:
  struct impl;
  std::unique_ptr<impl> impl_;
};

}  // namespace waggle::gateway
