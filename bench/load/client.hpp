#pragma once

// A Nostr client connection of the load tool: opens, answers the relay's
// NIP-42 challenge, then hands each relay message to its handlers. Handlers
// run on the connection's strand.

#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "bench/load/events.hpp"
#include "bench/load/ws_conn.hpp"

namespace waggle::bench {

struct client_handlers {
  std::function<void()> ready;  // authenticated
  std::function<void(std::string_view id, bool accepted, std::string_view message)> ok;
  std::function<void(std::string_view sub)> eose;
  std::function<void(std::string_view sub, std::string_view id)> event;
  std::function<void(std::string_view sub, std::string_view message)> closed;
  std::function<void(const std::string& error)> failed;  // could not open/auth, or dropped
};

// Splits a relay message into its verb and, for EVENT, the subscription and
// the event id, without building a DOM (subscribers see thousands per second).
struct relay_message {
  std::string_view verb;
  std::string_view sub_or_id;  // EVENT/EOSE/CLOSED: subscription; OK: event id; AUTH: challenge
  std::string_view event_id;   // EVENT only
  bool accepted = false;       // OK only
  std::string message;         // OK, CLOSED, NOTICE
};
bool parse_relay_message(std::string_view frame, relay_message& out);

class nostr_client : public std::enable_shared_from_this<nostr_client> {
 public:
  nostr_client(boost::asio::io_context& ioc, keypair key, std::string relay_url);

  void start(const ws_target& target, const boost::asio::ip::tcp::endpoint& endpoint,
             client_handlers handlers);
  void send(std::string frame) { conn_->send(std::move(frame)); }
  void close() { conn_->close(); }
  ws_conn::strand& executor() { return conn_->executor(); }
  const keypair& key() const { return key_; }
  bool authenticated() const { return authenticated_; }

 private:
  void on_frame(std::string_view frame);

  std::shared_ptr<ws_conn> conn_;
  keypair key_;
  std::string relay_url_;
  std::string auth_id_;
  bool authenticated_ = false;
  client_handlers handlers_;
};

}  // namespace waggle::bench
