#pragma once

// What a replayed actor sent a stand-in for an actor the replay does not run
// (the bus under the bus probe, the cluster relay under the hub), numbered
// from 1 in arrival order, which is the sender's order (one sender, one
// mailbox), with the promise of each request, answered only at its reply
// record (docs/traces.md; actors/trace/trace_numbered.hpp records both sides).

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <caf/atom.hpp>
#include <caf/error.hpp>
#include <caf/message.hpp>
#include <rapidjson/document.h>

#include "actors/replay/replay_player.hpp"
#include "messages/trace_codec.hpp"

namespace waggle {

struct replay_numbered_log {
  struct request {
    std::string type;     // "bus_publish", "cluster_barrier", ...
    std::string msg;      // trace_codec JSON
    uint64_t during = 0;  // the input being replayed when it was sent
    bool matched = false; // by its out record
    // Delivers the recorded reply ("error" or the reply's type); false when
    // it is not one this request waits for. Null: nothing to answer.
    std::function<bool(const std::string&, const rapidjson::Value&)> answer;
  };
  std::vector<request> requests;

  // A message that waits for no answer.
  template <class Msg>
  void note(const Msg& msg, const replay_player& player) {
    requests.push_back(
      {trace_codec::name_of<Msg>(), trace_codec::encode(msg), player.last_fed, false, nullptr});
  }

  // Keeps a request and its promise; the recorded reply (or error, as
  // [code, category]) is delivered through `answer` at its record.
  template <class Reply, class Self, class Req>
  caf::typed_response_promise<Reply> hold(Self* self, const replay_player& player,
                                          const Req& req) {
    auto promise = self->template make_response_promise<Reply>();
    requests.push_back(
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

  // Inside the stand-in: answers request n with the recorded reply; false
  // when the request does not wait for that.
  bool answer(uint64_t n, const std::string& type, const std::string& json) {
    auto& req = requests[n - 1];  // checked by reply_of
    rapidjson::Document doc;
    doc.Parse(json.data(), json.size());
    bool ok = !doc.HasParseError() && req.answer && req.answer(type, doc);
    req.answer = nullptr;  // answered once; drops the promise
    return ok;
  }

  // An out record: the replay's message n must be this one. Returns when it
  // was made, or nullopt with `replayed` saying what was sent instead.
  std::optional<uint64_t> match_out(uint64_t n, const std::string& type, const std::string& msg,
                                    std::string& replayed) {
    if (n == 0 || n > requests.size()) {
      replayed = "(no request " + std::to_string(n) + ")";
      return std::nullopt;
    }
    auto& req = requests[n - 1];
    if (req.matched || req.type != type || req.msg != msg) {
      replayed = req.type + " " + req.msg;
      return std::nullopt;
    }
    req.matched = true;
    return req.during;
  }

  // A reply record: the message for the stand-in that answers request n, or
  // nullopt with `error` set (no such request, not matched yet, or answered).
  std::optional<caf::message> reply_of(uint64_t n, const std::string& type,
                                       const std::string& msg, const std::string& whose,
                                       std::string& error) const {
    if (n == 0 || n > requests.size() || !requests[n - 1].matched) {
      error = "no request " + std::to_string(n) + " of the replay's " + whose + " is open";
      return std::nullopt;
    }
    if (!requests[n - 1].answer) {
      error = "request " + std::to_string(n) + " (" + requests[n - 1].type
              + ") was answered already or waits for nothing";
      return std::nullopt;
    }
    return caf::make_message(caf::atom("reply"), n, type, msg);
  }

  // A message the replay sent that no record holds (the first), if any.
  std::optional<std::string> unmatched_out() const {
    for (auto& r : requests)
      if (!r.matched)
        return r.type + " " + r.msg;
    return std::nullopt;
  }
};

template <class Msg>
std::optional<Msg> decode_trace_json(const std::string& json) {
  rapidjson::Document doc;
  doc.Parse(json.data(), json.size());
  Msg msg;
  if (doc.HasParseError() || !trace_codec::decode(doc, msg))
    return std::nullopt;
  return msg;
}

}  // namespace waggle
