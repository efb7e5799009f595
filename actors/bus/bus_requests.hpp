#pragma once

// A driver's open requests (docs/bus.md, "Request and reply"): each has an
// inbox subject of its own, `_INBOX.<node>.<run>.<n>`, named after the node
// so that inboxes never collide across a cluster, and after this run of it
// so that a restarted node never takes its previous run's late replies, and the promise its reply fulfils. The first
// message on the inbox answers it; later ones, and any after its deadline,
// are dropped.

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <caf/typed_response_promise.hpp>

#include "messages/bus.hpp"

namespace waggle {

class bus_requests {
 public:
  explicit bus_requests(std::string node_id);

  // A new inbox for a request whose reply goes to `promise`.
  std::string open(caf::typed_response_promise<bus_message> promise);
  // If `msg` is on an open inbox: answers that request and returns true.
  bool answer(bus_message& msg);
  // The request on `inbox` ran out of time: true if it was still open.
  bool expire(const std::string& inbox);
  // Ends the request on `inbox` with `err`: true if it was still open.
  bool fail(const std::string& inbox, caf::error err);
  bool is_open(const std::string& inbox) const { return open_.count(inbox) > 0; }
  bool is_inbox(const std::string& subject) const;
  // What every inbox of this run starts with, "_INBOX.<node>.<run>." (a
  // transport with wildcards takes them all with one subscription).
  const std::string& prefix() const { return prefix_; }
  size_t size() const { return open_.size(); }

 private:
  std::string prefix_;
  uint64_t next_ = 0;
  std::map<std::string, caf::typed_response_promise<bus_message>> open_;
};

}  // namespace waggle
