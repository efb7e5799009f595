#include "actors/replay/delivery_replay.hpp"

#include <rapidjson/document.h>

#include "actors/delivery/delivery_slot.hpp"

namespace waggle {

namespace {

// Signs the replayed slots' NIP-98 headers, which nobody reads: the relay's
// own key never reaches a trace or a replay.
const std::string stand_in_secret = std::string(63, '0') + "1";

template <class Msg>
std::optional<Msg> decode(const std::string& json) {
  rapidjson::Document doc;
  doc.Parse(json.data(), json.size());
  Msg msg;
  if (doc.HasParseError() || !trace_codec::decode(doc, msg))
    return std::nullopt;
  return msg;
}

}  // namespace

std::string render_delivery_post(const std::string& url, const std::string& delivery_id,
                                 const std::string& body) {
  return "POST " + url + " X-Waggle-Delivery-Id: " + delivery_id + " " + body;
}

void replay_http_client::post(gateway::http_post request,
                              std::function<void(gateway::http_result)>) {
  std::string id;
  for (auto& [name, value] : request.headers)
    if (name == "X-Waggle-Delivery-Id")
      id = value;
  // `done` is dropped: the answer reaches the slot at its recorded input.
  posts_->made.push_back({render_delivery_post(request.url, id, request.body), player_->last_fed});
}

delivery_replay_spec listener_delivery_spec(uint32_t slots) {
  delivery_replay_spec spec{"delivery_supervisor", "delivery_store", {}};
  spec.settings.slots = slots;  // the rest: the node's defaults, as spawn_delivery uses them
  return spec;
}

delivery_replay_spec push_delivery_spec(uint32_t slots, int64_t completion_delay_ms) {
  delivery_replay_spec spec{"push_delivery", "push_store", {}};
  auto& s = spec.settings;
  s.queue = "push";
  s.slots = slots;
  s.per_route = 0;
  s.claim_when_freed = false;
  // Only whether it is 0 matters here (each completion at once, or held
  // until the flush): the flush fires at its "timer" record.
  s.completion_delay = std::chrono::milliseconds(completion_delay_ms);
  return spec;
}

delivery_replay::delivery_replay(caf::actor_system& sys, replay_player_ptr player,
                                 const node_env& env, delivery_replay_spec spec,
                                 delivery_store_actor store)
  : player_(std::move(player)), posts_(std::make_shared<replay_posts>()),
    name_(spec.supervisor), slot_prefix_(spec.settings.queue + "-slot-") {
  spec.settings.relay_secret = stand_in_secret;
  auto sup = sys.spawn(delivery_supervisor_actor_impl, store,
                       std::make_shared<replay_http_client>(player_, posts_),
                       std::move(spec.settings), env.for_actor(spec.supervisor));
  supervisor_ = caf::actor_cast<caf::actor>(sup);
  // The store stub names the requester; the slots named themselves (spawned).
  player_->name(supervisor_.address(), spec.supervisor);
  player_->name(store.address(), spec.store);
}

bool delivery_replay::owns(const std::string& actor) const {
  return actor == name_ || actor.rfind(slot_prefix_, 0) == 0;
}

std::optional<delivery_replay::input>
delivery_replay::input_of(const std::string& actor, const std::string& kind,
                          const std::string& type, const std::string& msg,
                          std::string& error) const {
  auto to_supervisor = [&](auto decoded) -> std::optional<input> {
    if (actor != name_) {
      error = "a " + type + " goes to " + name_ + ", not " + actor;
      return std::nullopt;
    }
    if (!decoded) {
      error = "not a " + type;
      return std::nullopt;
    }
    return input{supervisor_, caf::make_message(std::move(*decoded))};
  };
  if (kind == "input" && type == "delivery_wake")
    return to_supervisor(decode<delivery_wake>(msg));
  if (kind == "input" && type == "listener_health")
    return to_supervisor(decode<listener_health>(msg));
  if (kind == "timer" && type == "delivery_tick")
    return to_supervisor(decode<delivery_tick>(msg));
  if (kind == "input" && type == "delivery_ready")
    return to_supervisor(decode<delivery_ready>(msg));
  if (kind == "timer" && type == "delivery_flush")
    return to_supervisor(decode<delivery_flush>(msg));
  if (kind == "input" && type == "delivery_response_in") {
    auto slot = actor.rfind(slot_prefix_, 0) == 0 ? player_->spawned_actor(actor) : std::nullopt;
    auto in = decode<delivery_response_in>(msg);
    if (!slot)
      error = "no such delivery slot was spawned";
    else if (!in)
      error = "not a delivery_response_in";
    else
      return input{*slot, caf::make_message(std::move(*in))};
  }
  return std::nullopt;
}

std::optional<std::string> delivery_replay::expected_post(const std::string& msg) {
  auto a = decode<delivery_attempt>(msg);
  if (!a)
    return std::nullopt;
  return render_delivery_post(a->job.url, a->job.delivery_id, a->job.body);
}

std::optional<uint64_t> delivery_replay::match_post(const std::string& expected,
                                                    std::string& replayed) {
  replay_posts::post* first_open = nullptr;
  for (auto& p : posts_->made) {
    if (p.matched)
      continue;
    if (p.text == expected) {
      p.matched = true;
      return p.during;
    }
    if (!first_open)
      first_open = &p;
  }
  replayed = first_open ? first_open->text : "(no POST)";
  return std::nullopt;
}

std::optional<std::string> delivery_replay::unmatched_post() const {
  for (auto& p : posts_->made)
    if (!p.matched)
      return p.text;
  return std::nullopt;
}

}  // namespace waggle
