#pragma once

// A stand-in operator listener (docs/delivery.md) for the listener workloads,
// on an http_stub (its own io thread, receipt times stamped when read).
// Healthy, it answers 200 at once; stalled, it reads the request and never
// answers (the socket is held until the receiver stops), which is what a
// hung agent looks like to the relay.

#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "bench/load/http_stub.hpp"

namespace waggle::bench {

class listener_receiver {
 public:
  struct receipt {
    std::string event_id;     // body.event.id ("" if the body was not a delivery)
    std::string delivery_id;  // body.delivery_id
    int64_t at_ns = 0;        // steady clock (now_ns()), when the whole request was read
  };

  // Binds 127.0.0.1:port (0: any free port) and starts serving; throws on failure.
  listener_receiver(uint16_t port, bool stalled);
  ~listener_receiver();
  listener_receiver(const listener_receiver&) = delete;
  listener_receiver& operator=(const listener_receiver&) = delete;

  uint16_t port() const { return stub_.port(); }
  bool stalled() const { return stalled_; }
  size_t requests() const { return requests_.load(std::memory_order_relaxed); }
  // Closes every socket and joins the io thread; idempotent.
  void stop() { stub_.stop(); }
  // Every receipt so far, in arrival order.
  std::vector<receipt> receipts();

 private:
  int on_request(const http_stub::request& req, int64_t at_ns);

  bool stalled_;
  std::atomic<size_t> requests_{0};
  std::mutex mutex_;
  std::vector<receipt> receipts_;
  http_stub stub_;  // last: its io thread stops before the rest goes
};

// body.event.id and body.delivery_id of a delivery's JSON body; false if it is not one.
bool parse_delivery(const std::string& body, std::string& event_id, std::string& delivery_id);

}  // namespace waggle::bench
