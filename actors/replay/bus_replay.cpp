#include "actors/replay/bus_replay.hpp"

#include <caf/atom.hpp>
#include <caf/error.hpp>

namespace waggle {

namespace {

template <class Msg>
std::optional<Msg> decode(const std::string& json) {
  rapidjson::Document doc;
  doc.Parse(json.data(), json.size());
  Msg msg;
  if (doc.HasParseError() || !trace_codec::decode(doc, msg))
    return std::nullopt;
  return msg;
}

// Keeps a request and its promise; the recorded reply (or error, as
// [code, category]) is delivered through `answer` at its record.
template <class Reply, class Self, class Req>
caf::typed_response_promise<Reply> hold(Self* self, replay_bus_log& log,
                                        const replay_player& player, const Req& req) {
  auto promise = self->template make_response_promise<Reply>();
  log.requests.push_back(
    {trace_codec::name_of<Req>(), trace_codec::encode(req), player.last_fed, false,
     [promise](const std::string& type, const rapidjson::Value& v) mutable {
       if (type == "error") {
         if (!v.IsArray() || v.Size() != 2 || !v[0].IsUint() || v[0].GetUint() > 255
             || !v[1].IsString())
           return false;
         promise.deliver(caf::error{static_cast<uint8_t>(v[0].GetUint()),
                                    caf::atom_from_string(v[1].GetString())});
         return true;
       }
       Reply reply;
       if (type != trace_codec::name_of<Reply>() || !trace_codec::decode(v, reply))
         return false;
       promise.deliver(std::move(reply));
       return true;
     }});
  return promise;
}

replay_bus_actor::behavior_type replay_bus(replay_bus_actor::pointer self,
                                           std::shared_ptr<replay_bus_log> log,
                                           replay_player_ptr player) {
  return {
    [self, log, player](bus_publish& p) { return hold<bus_ack>(self, *log, *player, p); },
    [self, log, player](bus_subscribe& s) {
      return hold<bus_subscription>(self, *log, *player, s);
    },
    [log, player](bus_unsubscribe u) {
      log->requests.push_back({trace_codec::name_of<bus_unsubscribe>(), trace_codec::encode(u),
                               player->last_fed, false, nullptr});
    },
    [self, log, player](bus_request& r) { return hold<bus_message>(self, *log, *player, r); },
    // Promises are delivered from inside the actor that made them.
    [log, player](caf::atom_value, uint64_t n, const std::string& type, const std::string& json) {
      auto& req = log->requests[n - 1];  // checked by reply_of
      rapidjson::Document doc;
      doc.Parse(json.data(), json.size());
      if (doc.HasParseError() || !req.answer(type, doc))
        player->divergence_if_none({player->current_seq, "bus_probe", "bus_reply", type + " " + json,
                                    "the " + req.type + " does not wait for that"});
      req.answer = nullptr;  // answered once; drops the promise
    },
  };
}

}  // namespace

bus_replay::bus_replay(caf::actor_system& sys, replay_player_ptr player, const node_env& env,
                       bus_probe_settings settings)
  : player_(std::move(player)), log_(std::make_shared<replay_bus_log>()) {
  auto bus = sys.spawn(replay_bus, log_, player_);
  bus_ = caf::actor_cast<caf::actor>(bus);
  probe_ = caf::actor_cast<caf::actor>(
    sys.spawn(bus_probe_impl, caf::actor_cast<bus_actor>(bus), std::move(settings),
              env.for_actor("bus_probe")));
  player_->name(probe_.address(), "bus_probe");
}

std::optional<caf::message> bus_replay::input_of(const std::string& kind, const std::string& type,
                                                 const std::string& msg,
                                                 std::string& error) const {
  auto as_message = [&](auto decoded) -> std::optional<caf::message> {
    if (!decoded) {
      error = "not a " + type;
      return std::nullopt;
    }
    return caf::make_message(std::move(*decoded));
  };
  if (kind == "input" && type == "bus_message")
    return as_message(decode<bus_message>(msg));
  if (kind == "input" && type == "bus_lagged")
    return as_message(decode<bus_lagged>(msg));
  if (kind == "timer" && type == "bus_probe_tick")
    return as_message(decode<bus_probe_tick>(msg));
  if (kind == "timer" && type == "bus_probe_deadline")
    return as_message(decode<bus_probe_deadline>(msg));
  error = "the bus probe takes no " + kind + " " + type;
  return std::nullopt;
}

std::optional<uint64_t> bus_replay::match_out(uint64_t n, const std::string& type,
                                              const std::string& msg, std::string& replayed) {
  if (n == 0 || n > log_->requests.size()) {
    replayed = "(no request " + std::to_string(n) + ")";
    return std::nullopt;
  }
  auto& req = log_->requests[n - 1];
  if (req.matched || req.type != type || req.msg != msg) {
    replayed = req.type + " " + req.msg;
    return std::nullopt;
  }
  req.matched = true;
  return req.during;
}

std::optional<caf::message> bus_replay::reply_of(uint64_t n, const std::string& type,
                                                 const std::string& msg,
                                                 std::string& error) const {
  if (n == 0 || n > log_->requests.size() || !log_->requests[n - 1].matched) {
    error = "no request " + std::to_string(n) + " of the replay's bus probe is open";
    return std::nullopt;
  }
  if (!log_->requests[n - 1].answer) {
    error = "request " + std::to_string(n) + " (" + log_->requests[n - 1].type
            + ") was answered already or waits for nothing";
    return std::nullopt;
  }
  return caf::make_message(caf::atom("reply"), n, type, msg);
}

std::optional<std::string> bus_replay::unmatched_out() const {
  for (auto& r : log_->requests)
    if (!r.matched)
      return r.type + " " + r.msg;
  return std::nullopt;
}

}  // namespace waggle
