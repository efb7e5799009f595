#include "actors/bus/bus_requests.hpp"

#include <random>

namespace waggle {

namespace {

// Per start of the node: a node restarted under the same id must not take
// a late reply to its previous run's inbox of the same number for its own.
std::string run_token() {
  std::random_device rd;
  static constexpr char digits[] = "0123456789abcdef";
  std::string out;
  for (int i = 0; i < 4; ++i) {
    auto v = rd();
    out.push_back(digits[v & 15]);
    out.push_back(digits[(v >> 4) & 15]);
    out.push_back(digits[(v >> 8) & 15]);
    out.push_back(digits[(v >> 12) & 15]);
  }
  return out;
}

}  // namespace

bus_requests::bus_requests(std::string node_id)
  : prefix_("_INBOX." + std::move(node_id) + "." + run_token() + ".") {
}

std::string bus_requests::open(caf::typed_response_promise<bus_message> promise) {
  auto inbox = prefix_ + std::to_string(++next_);
  open_.emplace(inbox, std::move(promise));
  return inbox;
}

bool bus_requests::answer(bus_message& msg) {
  auto i = open_.find(msg.subject);
  if (i == open_.end())
    return false;
  auto promise = std::move(i->second);
  open_.erase(i);
  promise.deliver(std::move(msg));
  return true;
}

bool bus_requests::expire(const std::string& inbox) {
  return fail(inbox, make_error(bus_errc::request_timeout));
}

bool bus_requests::fail(const std::string& inbox, caf::error err) {
  auto i = open_.find(inbox);
  if (i == open_.end())
    return false;
  auto promise = std::move(i->second);
  open_.erase(i);
  promise.deliver(std::move(err));
  return true;
}

bool bus_requests::is_inbox(const std::string& subject) const {
  return subject.compare(0, prefix_.size(), prefix_) == 0;
}

}  // namespace waggle
