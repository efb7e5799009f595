#pragma once

// A real nats-server (Debian's `nats-server`) for the NATS bus driver's
// tests: one process per object, on a free loopback port, with max_payload
// 2 MiB (a bus payload is up to 1 MiB; docs/bus.md, "NATS"). Its config and
// log live in a temporary directory removed with the object. stop() kills
// it (SIGKILL, as a crash would) and start() brings it back on the same
// port, for the tests of a server restart.
//
// Not installed, or it does not come up: the constructor throws, so a test
// that needs NATS fails, never skips.

#include <sys/types.h>

#include <cstdint>
#include <filesystem>
#include <string>

namespace waggle::testing {

class nats_test_server {
 public:
  // `max_payload`: what the server takes in one message (bytes).
  explicit nats_test_server(int64_t max_payload = 2 * 1024 * 1024);
  ~nats_test_server();
  nats_test_server(const nats_test_server&) = delete;
  nats_test_server& operator=(const nats_test_server&) = delete;

  std::string url() const { return "nats://127.0.0.1:" + std::to_string(port_); }
  uint16_t port() const { return port_; }
  // Kills the server (SIGKILL) and waits for it to be gone.
  void stop();
  // Starts it (again) on its port; throws when it does not accept within 10 s.
  void start();
  bool running() const { return pid_ > 0; }
  std::string log() const;

 private:
  std::string binary_;
  std::filesystem::path dir_;
  uint16_t port_ = 0;
  pid_t pid_ = -1;
};

}  // namespace waggle::testing
