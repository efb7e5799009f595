#pragma once

// One LISTENing connection (docs/delivery.md, "Listen actor"): the channels
// are LISTENed on every new connection, and wait() returns the notifications
// that arrived, blocking at most `timeout` for the first. Owned by exactly
// one (detached) actor. A broken connection throws pqxx::broken_connection
// from wait(); the owner calls reset() and connects again later.

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include <pqxx/connection>

namespace waggle::db {

struct notification {
  std::string channel;
  std::string payload;
};

class listen_connection {
 public:
  listen_connection(std::string url, std::vector<std::string> channels);
  ~listen_connection();

  // Connects and LISTENs; false (and `error` set) when that failed.
  bool connect(std::string& error);
  bool connected() const { return conn_ != nullptr; }
  void reset();
  // The backend's pid (pg_terminate_backend in tests), 0 when not connected.
  int backend_pid() const;

  std::vector<notification> wait(std::chrono::milliseconds timeout);

  // Makes `wanted` the set of channels LISTENed: LISTENs the new ones and
  // UNLISTENs the ones gone at once when connected, and on every connect.
  // Throws like wait() when the connection broke meanwhile.
  void set_channels(std::vector<std::string> wanted);
  const std::vector<std::string>& channels() const { return channels_; }
  // What the server says this session LISTENs on (pg_listening_channels()).
  std::vector<std::string> listening();

 private:
  class receiver;
  std::string url_;
  std::vector<std::string> channels_;
  std::unique_ptr<pqxx::connection> conn_;
  std::vector<std::unique_ptr<receiver>> receivers_;
  std::vector<notification> arrived_;
};

// NOTIFY `channel` with `payload` on `conn` (outside any transaction block:
// delivered once this statement commits).
void notify(pqxx::connection& conn, const std::string& channel, const std::string& payload);

}  // namespace waggle::db
