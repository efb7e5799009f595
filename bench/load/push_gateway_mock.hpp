#pragma once

// A mock push gateway (docs/push.md, the wire contract): the relay POSTs each
// wake as {"v":1,"request_id","endpoint_grant","expires_at","community",
// "event_id"} with `Authorization: Nostr <NIP-98>` and `X-Waggle-Delivery-Id:
// <request_id>`. The mock records every request with its receipt time and
// answers by the current mode, switchable at any time from any thread:
// 200 (delivered), 410 (endpoint gone), 503 (retry later) or stall (read,
// never answered, so the relay's timeout is what ends the exchange).
//
// Used by the push benchmark (waggle-load --workload push) and by end-to-end
// tests; target waggle_http_stub (Boost and rapidjson only).

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "bench/load/http_stub.hpp"

namespace waggle::bench {

class mock_push_gateway {
 public:
  enum class mode { ok, gone, unavailable, stall };  // 200, 410, 503, never

  struct wake {
    // From the body (empty / 0 when absent or not of the expected type).
    bool parsed = false;  // a JSON object with v == 1 and every field of the right type
    int64_t v = 0;
    std::string request_id;
    std::string endpoint_grant;
    int64_t expires_at = 0;
    std::string community;
    std::string event_id;
    // From the request line and headers.
    std::string method;
    std::string target;
    std::string authorization;  // "" when absent
    std::string delivery_id;    // X-Waggle-Delivery-Id, "" when absent
    std::string body;
    int64_t at_ns = 0;  // steady clock (http_stub::now_ns()), when the request was read
    int answered = 0;   // the status it got, or http_stub::stall
    bool has_nostr_authorization() const { return authorization.rfind("Nostr ", 0) == 0; }
  };

  // Binds 127.0.0.1:port (0: any free port); throws when it cannot.
  explicit mock_push_gateway(uint16_t port = 0, mode m = mode::ok);
  ~mock_push_gateway();
  mock_push_gateway(const mock_push_gateway&) = delete;
  mock_push_gateway& operator=(const mock_push_gateway&) = delete;

  uint16_t port() const { return stub_.port(); }
  std::string url() const { return stub_.url("/wake"); }  // for --push-gateway-url
  void set_mode(mode m) { mode_.store(m, std::memory_order_relaxed); }
  mode current_mode() const { return mode_.load(std::memory_order_relaxed); }

  size_t requests() const { return requests_.load(std::memory_order_acquire); }
  // Every request so far, in arrival order (retries included).
  std::vector<wake> wakes();
  // Until at least `n` requests were read or `within` passed; the count then.
  size_t wait_for(size_t n, std::chrono::milliseconds within);
  // Closes every socket (stalled ones too) and joins the io thread; idempotent.
  void stop() { stub_.stop(); }

 private:
  int on_request(const http_stub::request& req, int64_t at_ns);

  std::atomic<mode> mode_;
  std::atomic<size_t> requests_{0};
  std::mutex mutex_;
  std::condition_variable arrived_;
  std::vector<wake> wakes_;
  http_stub stub_;  // last: its io thread stops before the rest goes
};

// Fills the body fields of `out` from a wake's JSON body; false (and
// out.parsed false) when it is not a v1 wake.
bool parse_wake(const std::string& body, mock_push_gateway::wake& out);

int status_of(mock_push_gateway::mode m);  // 200, 410, 503 or http_stub::stall

}  // namespace waggle::bench
