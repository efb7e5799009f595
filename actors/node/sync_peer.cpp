#include "actors/node/sync_peer.hpp"

#include <deque>
#include <map>
#include <optional>
#include <set>

#include <rapidjson/document.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include "gateway/http_client.hpp"
#include "messages/proto/event.hpp"

namespace waggle {

namespace neg = proto::negentropy;

namespace {

std::string json_string(std::string_view s) {
  rapidjson::StringBuffer buf;
  rapidjson::Writer<rapidjson::StringBuffer> w(buf);
  w.String(s.data(), static_cast<rapidjson::SizeType>(s.size()));
  return std::string(buf.GetString(), buf.GetSize());
}

// Frames come from a relay we do not control: parsed iteratively, so a
// deeply nested one costs heap, not the stack (red team: 4 MiB of '[' was
// a SIGSEGV).
bool parse_frame(rapidjson::Document& d, const std::string& text) {
  d.Parse<rapidjson::kParseIterativeFlag>(text.data(), text.size());
  return !d.HasParseError() && d.IsArray();
}

std::string str(const rapidjson::Value& v) {
  return v.IsString() ? std::string(v.GetString(), v.GetStringLength()) : std::string();
}

// The raw text of one element of a frame (an event object), re-serialised.
std::string raw_of(const rapidjson::Value& v) {
  rapidjson::StringBuffer buf;
  rapidjson::Writer<rapidjson::StringBuffer> w(buf);
  v.Accept(w);
  return std::string(buf.GetString(), buf.GetSize());
}

}  // namespace

std::string sync_peer::connect(const std::string& url, const std::string& secret_hex,
                               const std::string& connect_to) {
  url_ = url;
  std::string as_http;
  if (url.rfind("ws://", 0) == 0)
    as_http = "http://" + url.substr(5);
  else if (url.rfind("wss://", 0) == 0)
    return "wss:// is not supported: sync over ws:// (a TLS tunnel such as stunnel can carry it)";
  else
    return "the URL must start with ws://";
  auto parsed = gateway::parse_http_url(as_http);
  if (!parsed)
    return "not a usable URL: " + url;
  auto authority = as_http.substr(7, as_http.find_first_of("/?", 7) - 7);
  std::string address = parsed->host;
  uint16_t port = parsed->port;
  if (!connect_to.empty()) {
    auto via = gateway::parse_http_url("http://" + connect_to);
    if (!via || via->target != "/")
      return "--connect-to takes address:port, not " + connect_to;
    address = via->host;
    port = via->port;
  }
  if (!ws_.connect(address, port, authority, parsed->target, timeout_))
    return "cannot connect to " + url + ": " + ws_.error();
  // The relay opens with its challenge.
  std::string challenge;
  auto deadline = std::chrono::steady_clock::now() + timeout_;
  while (challenge.empty()) {
    if (std::chrono::steady_clock::now() > deadline)
      return "no AUTH challenge from " + url;
    auto frame = ws_.read_text(timeout_);
    if (!frame)
      return "connection ended before the AUTH challenge";
    rapidjson::Document d;
    if (parse_frame(d, *frame) && d.Size() >= 2 && str(d[0]) == "AUTH")
      challenge = str(d[1]);
  }
  if (secret_hex.empty())
    return {};
  proto::event auth;
  auth.kind = 22242;
  auth.created_at = std::chrono::duration_cast<std::chrono::seconds>(
                      std::chrono::system_clock::now().time_since_epoch())
                      .count();
  auth.tags = {{"relay", url}, {"challenge", challenge}};
  proto::sign(auth, secret_hex);
  if (!ws_.send_text("[\"AUTH\"," + auth.raw + "]", timeout_))
    return "cannot send AUTH: " + ws_.error();
  for (;;) {
    auto frame = ws_.read_text(timeout_);
    if (!frame)
      return "no answer to AUTH";
    rapidjson::Document d;
    if (!parse_frame(d, *frame) || d.Size() < 4 || str(d[0]) != "OK" ||
        str(d[1]) != auth.id)
      continue;
    if (!d[2].IsBool() || !d[2].GetBool())
      return "AUTH refused: " + str(d[3]);
    return {};
  }
}

sync_peer::reconciled sync_peer::reconcile(const proto::filter& f, const neg::storage& ours,
                                           size_t frame_size_limit) {
  reconciled out;
  neg::reconciler client(ours, frame_size_limit);
  const std::string sub = "sync-" + std::to_string(next_sub_++);
  std::string frame = "[\"NEG-OPEN\"," + json_string(sub) + "," + proto::to_json(f) + ",\"" +
                      neg::to_hex(client.initiate()) + "\"]";
  for (;;) {
    out.bytes_sent += frame.size();
    if (!ws_.send_text(frame, timeout_)) {
      out.error = "send failed: " + ws_.error();
      return out;
    }
    std::string answer;
    // A relay that sends anything but the answer gets `timeout_` in all, not per frame.
    const auto deadline = std::chrono::steady_clock::now() + timeout_;
    while (answer.empty()) {
      auto in = std::chrono::steady_clock::now() < deadline ? ws_.read_text(timeout_) : std::nullopt;
      if (!in) {
        out.error = "no NEG-MSG from the relay";
        return out;
      }
      rapidjson::Document d;
      if (!parse_frame(d, *in) || d.Size() < 3 || str(d[1]) != sub)
        continue;
      out.bytes_received += in->size();
      if (str(d[0]) == "NEG-ERR") {
        out.error = "the relay refused: " + str(d[2]);
        return out;
      }
      if (str(d[0]) != "NEG-MSG" || !neg::from_hex(str(d[2]), answer) || answer.empty()) {
        out.error = "malformed NEG-MSG from the relay";
        return out;
      }
    }
    ++out.round_trips;
    auto next = client.reconcile(answer);
    if (!next.error.empty()) {
      out.error = "malformed negentropy message from the relay: " + next.error;
      return out;
    }
    for (auto& id : next.have)
      out.have.push_back(neg::to_hex(id));
    for (auto& id : next.need)
      out.need.push_back(neg::to_hex(id));
    if (next.message.empty())
      break;
    frame = "[\"NEG-MSG\"," + json_string(sub) + ",\"" + neg::to_hex(next.message) + "\"]";
  }
  ws_.send_text("[\"NEG-CLOSE\"," + json_string(sub) + "]", timeout_);
  return out;
}

std::vector<std::string> sync_peer::fetch(const proto::filter& f,
                                          const std::vector<std::string>& ids,
                                          std::string& error) {
  constexpr size_t chunk = 100;  // well under any relay's per-filter value cap
  std::vector<std::string> raws;
  for (size_t at = 0; at < ids.size(); at += chunk) {
    proto::filter ask = f;
    ask.ids = std::vector<std::string>(ids.begin() + at, ids.begin() + std::min(ids.size(), at + chunk));
    ask.limit = static_cast<uint32_t>(ask.ids->size());
    ask.since.reset();
    ask.until.reset();
    const std::string sub = "fetch-" + std::to_string(next_sub_++);
    // Only what was asked is taken: a relay cannot slip other events in.
    std::set<std::string> asked(ask.ids->begin(), ask.ids->end());
    const auto deadline = std::chrono::steady_clock::now() + timeout_;
    if (!ws_.send_text("[\"REQ\"," + json_string(sub) + "," + proto::to_json(ask) + "]", timeout_)) {
      error = "send failed: " + ws_.error();
      return raws;
    }
    for (;;) {
      auto in = std::chrono::steady_clock::now() < deadline ? ws_.read_text(timeout_) : std::nullopt;
      if (!in) {
        error = "no answer to a fetch";
        return raws;
      }
      rapidjson::Document d;
      if (!parse_frame(d, *in) || d.Size() < 2 || str(d[1]) != sub)
        continue;
      auto verb = str(d[0]);
      if (verb == "EVENT" && d.Size() >= 3 && d[2].IsObject()) {
        auto raw = raw_of(d[2]);
        auto ev = proto::parse_event(raw);
        if (ev && asked.erase(ev->id) > 0 && proto::matches(ask, *ev))
          raws.push_back(std::move(raw));
      } else if (verb == "EOSE") {
        ws_.send_text("[\"CLOSE\"," + json_string(sub) + "]", timeout_);
        break;
      } else if (verb == "CLOSED") {
        error = "fetch refused: " + (d.Size() >= 3 ? str(d[2]) : std::string());
        return raws;
      }
    }
  }
  return raws;
}

sync_peer::published sync_peer::publish(const std::vector<std::string>& raws, std::string& error) {
  constexpr size_t window = 200;  // OKs awaited at once, under the relay's in-flight cap
  published out;
  std::map<std::string, bool> waiting;  // id -> awaited
  size_t next = 0;
  // Each OK we wait for must come within `timeout_` of the last one, however
  // many other frames the relay sends meanwhile.
  auto deadline = std::chrono::steady_clock::now() + timeout_;
  auto read_one = [&]() -> bool {
    auto in = std::chrono::steady_clock::now() < deadline ? ws_.read_text(timeout_) : std::nullopt;
    if (!in) {
      error = "no OK from the relay";
      return false;
    }
    rapidjson::Document d;
    if (!parse_frame(d, *in) || d.Size() < 4 || str(d[0]) != "OK")
      return true;
    auto id = str(d[1]);
    if (waiting.erase(id) == 0)
      return true;
    deadline = std::chrono::steady_clock::now() + timeout_;
    auto message = str(d[3]);
    if (d[2].IsBool() && d[2].GetBool()) {
      if (message.rfind("duplicate:", 0) == 0)
        ++out.duplicates;
      else
        ++out.accepted;
    } else {
      out.refused.emplace_back(id, message);
    }
    return true;
  };
  while (next < raws.size() || !waiting.empty()) {
    while (next < raws.size() && waiting.size() < window) {
      auto parsed = proto::parse_event(raws[next]);
      if (!parsed) {
        out.refused.emplace_back("", "unreadable stored event");
        ++next;
        continue;
      }
      waiting[parsed->id] = true;
      if (!ws_.send_text("[\"EVENT\"," + raws[next] + "]", timeout_)) {
        error = "send failed: " + ws_.error();
        return out;
      }
      ++next;
    }
    if (!waiting.empty() && !read_one())
      return out;
  }
  return out;
}

}  // namespace waggle
