#include "bench/load/push_gateway_mock.hpp"

#include <rapidjson/document.h>

namespace waggle::bench {

bool parse_wake(const std::string& body, mock_push_gateway::wake& out) {
  out.parsed = false;
  rapidjson::Document doc;
  doc.Parse(body.c_str(), body.size());
  if (doc.HasParseError() || !doc.IsObject())
    return false;
  bool ok = true;
  auto text = [&](const char* name, std::string& into) {
    auto m = doc.FindMember(name);
    if (m == doc.MemberEnd() || !m->value.IsString())
      return void(ok = false);
    into.assign(m->value.GetString(), m->value.GetStringLength());
  };
  auto integer = [&](const char* name, int64_t& into) {
    auto m = doc.FindMember(name);
    if (m == doc.MemberEnd() || !m->value.IsInt64())
      return void(ok = false);
    into = m->value.GetInt64();
  };
  integer("v", out.v);
  text("request_id", out.request_id);
  text("endpoint_grant", out.endpoint_grant);
  integer("expires_at", out.expires_at);
  text("community", out.community);
  text("event_id", out.event_id);
  out.parsed = ok && out.v == 1;
  return out.parsed;
}

int status_of(mock_push_gateway::mode m) {
  switch (m) {
    case mock_push_gateway::mode::ok: return 200;
    case mock_push_gateway::mode::gone: return 410;
    case mock_push_gateway::mode::unavailable: return 503;
    case mock_push_gateway::mode::stall: return http_stub::stall;
  }
  return 500;
}

mock_push_gateway::mock_push_gateway(uint16_t port, mode m)
    : mode_(m), stub_(port, [this](const http_stub::request& req, int64_t at_ns) {
        return on_request(req, at_ns);
      }) {}

mock_push_gateway::~mock_push_gateway() { stop(); }

int mock_push_gateway::on_request(const http_stub::request& req, int64_t at_ns) {
  wake w;
  w.at_ns = at_ns;
  parse_wake(req.body(), w);
  w.method = std::string{req.method_string()};
  w.target = std::string{req.target()};
  if (auto a = req.find(boost::beast::http::field::authorization); a != req.end())
    w.authorization = std::string{a->value()};
  if (auto d = req.find("X-Waggle-Delivery-Id"); d != req.end())
    w.delivery_id = std::string{d->value()};
  w.body = req.body();
  w.answered = status_of(current_mode());
  auto answer = w.answered;
  {
    std::lock_guard lock{mutex_};
    wakes_.push_back(std::move(w));
    // Under the lock: a waiter between its check and its wait cannot miss it.
    requests_.fetch_add(1, std::memory_order_release);
  }
  arrived_.notify_all();
  return answer;
}

std::vector<mock_push_gateway::wake> mock_push_gateway::wakes() {
  std::lock_guard lock{mutex_};
  return wakes_;
}

size_t mock_push_gateway::wait_for(size_t n, std::chrono::milliseconds within) {
  std::unique_lock lock{mutex_};
  arrived_.wait_for(lock, within, [&] { return wakes_.size() >= n; });
  return wakes_.size();
}

}  // namespace waggle::bench
