#include "bench/load/client.hpp"

#include <rapidjson/document.h>

namespace waggle::bench {

namespace {

// The string value starting right after `key` (e.g. `"id":"`) in `text`.
std::string_view string_after(std::string_view text, std::string_view key) {
  auto at = text.find(key);
  if (at == std::string_view::npos)
    return {};
  auto start = at + key.size();
  auto end = text.find('"', start);
  return end == std::string_view::npos ? std::string_view{} : text.substr(start, end - start);
}

}  // namespace

bool parse_relay_message(std::string_view frame, relay_message& out) {
  out = relay_message{};
  // EVENT frames: ["EVENT","<sub>",{"id":"<64 hex>",...}] as the relay writes them.
  constexpr std::string_view event_prefix = "[\"EVENT\",\"";
  if (frame.rfind(event_prefix, 0) == 0) {
    auto rest = frame.substr(event_prefix.size());
    auto end = rest.find('"');
    if (end == std::string_view::npos)
      return false;
    out.verb = "EVENT";
    out.sub_or_id = rest.substr(0, end);
    out.event_id = string_after(rest.substr(end), "\"id\":\"");
    return out.event_id.size() == 64;
  }
  rapidjson::Document doc;
  doc.Parse(frame.data(), frame.size());
  if (doc.HasParseError() || !doc.IsArray() || doc.Empty() || !doc[0].IsString())
    return false;
  // Views point into `frame` (the strings are not escaped in what we read).
  auto view = [&](const rapidjson::Value& v) -> std::string_view {
    if (!v.IsString())
      return {};
    auto at = frame.find(std::string_view{v.GetString(), v.GetStringLength()});
    return at == std::string_view::npos ? std::string_view{}
                                        : frame.substr(at, v.GetStringLength());
  };
  out.verb = view(doc[0]);
  auto size = doc.Size();
  if (size > 1)
    out.sub_or_id = view(doc[1]);
  if (out.verb == "OK" && size >= 4 && doc[2].IsBool() && doc[3].IsString()) {
    out.accepted = doc[2].GetBool();
    out.message.assign(doc[3].GetString(), doc[3].GetStringLength());
  } else if (out.verb == "CLOSED" && size >= 3 && doc[2].IsString()) {
    out.message.assign(doc[2].GetString(), doc[2].GetStringLength());
  } else if (out.verb == "NOTICE" && size >= 2 && doc[1].IsString()) {
    out.message.assign(doc[1].GetString(), doc[1].GetStringLength());
  }
  return !out.verb.empty();
}

nostr_client::nostr_client(boost::asio::io_context& ioc, keypair key, std::string relay_url)
    : conn_(std::make_shared<ws_conn>(ioc)), key_(std::move(key)), relay_url_(std::move(relay_url)) {}

void nostr_client::start(const ws_target& target, const boost::asio::ip::tcp::endpoint& endpoint,
                         client_handlers handlers) {
  handlers_ = std::move(handlers);
  auto self = shared_from_this();
  conn_->on_message([self](std::string_view frame) { self->on_frame(frame); });
  conn_->on_closed([self](const std::string& error) {
    if (!error.empty() && self->handlers_.failed)
      self->handlers_.failed("connection ended: " + error);
  });
  conn_->open(target, endpoint, [self](const std::string& error) {
    if (!error.empty() && self->handlers_.failed)
      self->handlers_.failed(error);
  });
}

void nostr_client::on_frame(std::string_view frame) {
  relay_message m;
  if (!parse_relay_message(frame, m))
    return;
  if (m.verb == "EVENT") {
    if (handlers_.event)
      handlers_.event(m.sub_or_id, m.event_id);
  } else if (m.verb == "OK") {
    if (!authenticated_ && m.sub_or_id == auth_id_) {
      if (!m.accepted) {
        if (handlers_.failed)
          handlers_.failed("AUTH refused: " + m.message);
        return;
      }
      authenticated_ = true;
      if (handlers_.ready)
        handlers_.ready();
    } else if (handlers_.ok) {
      handlers_.ok(m.sub_or_id, m.accepted, m.message);
    }
  } else if (m.verb == "EOSE") {
    if (handlers_.eose)
      handlers_.eose(m.sub_or_id);
  } else if (m.verb == "CLOSED") {
    if (handlers_.closed)
      handlers_.closed(m.sub_or_id, m.message);
  } else if (m.verb == "AUTH" && !authenticated_ && auth_id_.empty()) {
    auto frame_out = auth_frame(key_, m.sub_or_id, relay_url_);
    auth_id_ = std::string{string_after(frame_out, "\"id\":\"")};
    conn_->send(std::move(frame_out));
  }
}

}  // namespace waggle::bench
