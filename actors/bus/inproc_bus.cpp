#include "actors/bus/inproc_bus.hpp"

#include "actors/bus/bus_check.hpp"

#include <chrono>

namespace waggle {

void inproc_bus_state::deliver(bus_message msg) {
  if (requests.answer(msg))
    return;
  auto recipients = table.recipients(msg.subject);
  if (env.stats)
    env.stats->bus.delivered += recipients.size();
  for (auto& r : recipients)
    self->send(r, msg);
}

caf::result<bus_ack> inproc_bus_state::publish(bus_publish& msg) {
  if (auto err = bus_check(env, msg))
    return err;
  if (env.stats)
    ++env.stats->bus.published;
  deliver(bus_message{std::move(msg.subject), std::move(msg.payload), std::move(msg.reply_to)});
  return bus_ack{++published};
}

caf::result<bus_subscription> inproc_bus_state::subscribe(bus_subscribe& sub) {
  if (auto err = bus_check(env, sub))
    return err;
  if (!table.holds(sub.subscriber.address()))
    self->monitor(sub.subscriber);
  return bus_subscription{
    table.add(std::move(sub.subject), std::move(sub.group), std::move(sub.subscriber))};
}

void inproc_bus_state::unsubscribe(uint64_t id) {
  auto gone = table.remove(id);
  if (gone && !table.holds(gone->subscriber.address()))
    self->demonitor(gone->subscriber.address());
}

caf::result<bus_message> inproc_bus_state::request(bus_request& req) {
  if (auto err = bus_check(env, req))
    return err;
  if (!table.wants(req.subject))
    return make_error(bus_errc::no_responders, req.subject);
  auto promise = self->make_response_promise<bus_message>();
  auto inbox = requests.open(promise);
  self->delayed_send(self, std::chrono::milliseconds{req.timeout_ms}, bus_request_expired{inbox});
  if (env.stats)
    ++env.stats->bus.published;
  deliver(bus_message{std::move(req.subject), std::move(req.payload), std::move(inbox)});
  return promise;
}

inproc_bus_actor::behavior_type inproc_bus_impl(inproc_bus_state::ptr self, node_env env) {
  self->state.self = self;
  self->state.env = std::move(env);
  self->set_down_handler(
    [self](caf::down_msg& down) { self->state.table.remove_subscriber(down.source); });
  return {
    [self](bus_publish& msg) { return self->state.publish(msg); },
    [self](bus_subscribe& sub) { return self->state.subscribe(sub); },
    [self](bus_unsubscribe u) { self->state.unsubscribe(u.id); },
    [self](bus_request& req) { return self->state.request(req); },
    [self](bus_request_expired& e) { self->state.requests.expire(e.inbox); },
  };
}

}  // namespace waggle
