#include "actors/replay/delivery_replay.hpp"

#include <rapidjson/document.h>

#include "actors/delivery/delivery_slot.hpp"
#include "actors/delivery/delivery_supervisor.hpp"

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

delivery_replay::delivery_replay(caf::actor_system& sys, replay_player_ptr player,
                                 const node_env& env, uint32_t slots, caf::actor store)
  : player_(std::move(player)), posts_(std::make_shared<replay_posts>()) {
  delivery_settings settings;  // the node's defaults, as spawn_delivery uses them
  settings.slots = slots;
  settings.relay_secret = stand_in_secret;
  auto sup = sys.spawn(delivery_supervisor_impl, caf::actor_cast<delivery_store_actor>(store),
                       std::make_shared<replay_http_client>(player_, posts_), std::move(settings),
                       env.for_actor("delivery_supervisor"));
  supervisor_ = caf::actor_cast<caf::actor>(sup);
  // The store stub names the requester; the slots named themselves (spawned).
  player_->name(supervisor_.address(), "delivery_supervisor");
  player_->name(store.address(), "delivery_store");
}

std::optional<delivery_replay::input>
delivery_replay::input_of(const std::string& actor, const std::string& kind,
                          const std::string& type, const std::string& msg,
                          std::string& error) const {
  auto to_supervisor = [&](auto decoded) -> std::optional<input> {
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
  if (kind == "input" && type == "delivery_response_in") {
    auto slot = player_->spawned_actor(actor);
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
