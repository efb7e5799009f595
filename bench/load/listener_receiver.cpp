#include "bench/load/listener_receiver.hpp"

#include <rapidjson/document.h>

namespace waggle::bench {

bool parse_delivery(const std::string& body, std::string& event_id, std::string& delivery_id) {
  rapidjson::Document doc;
  doc.Parse(body.c_str(), body.size());
  if (doc.HasParseError() || !doc.IsObject())
    return false;
  auto d = doc.FindMember("delivery_id");
  auto e = doc.FindMember("event");
  if (d == doc.MemberEnd() || !d->value.IsString() || e == doc.MemberEnd() || !e->value.IsObject())
    return false;
  auto id = e->value.FindMember("id");
  if (id == e->value.MemberEnd() || !id->value.IsString())
    return false;
  delivery_id.assign(d->value.GetString(), d->value.GetStringLength());
  event_id.assign(id->value.GetString(), id->value.GetStringLength());
  return true;
}

listener_receiver::listener_receiver(uint16_t port, bool stalled)
    : stalled_(stalled),
      stub_(port, [this](const http_stub::request& req, int64_t at_ns) {
        return on_request(req, at_ns);
      }) {}

listener_receiver::~listener_receiver() { stop(); }

int listener_receiver::on_request(const http_stub::request& req, int64_t at_ns) {
  receipt r;
  r.at_ns = at_ns;
  parse_delivery(req.body(), r.event_id, r.delivery_id);
  {
    std::lock_guard lock{mutex_};
    receipts_.push_back(std::move(r));
  }
  // After the receipt: whoever sees the count can read the receipt.
  requests_.fetch_add(1, std::memory_order_release);
  return stalled_ ? http_stub::stall : 200;
}

std::vector<listener_receiver::receipt> listener_receiver::receipts() {
  std::lock_guard lock{mutex_};
  return receipts_;
}

}  // namespace waggle::bench
