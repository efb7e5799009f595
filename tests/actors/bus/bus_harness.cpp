#include "tests/actors/bus/bus_harness.hpp"

namespace waggle::testing {

void bus_inbox::push(bus_message msg) {
  {
    std::lock_guard guard{mtx_};
    msgs_.push_back(std::move(msg));
  }
  cv_.notify_all();
}

void bus_inbox::push(bus_lagged) {
  std::lock_guard guard{mtx_};
  ++lags_;
}

std::optional<bus_message> bus_inbox::next(std::chrono::milliseconds within) {
  std::unique_lock lock{mtx_};
  if (!cv_.wait_for(lock, within, [this] { return !msgs_.empty(); }))
    return std::nullopt;
  auto msg = std::move(msgs_.front());
  msgs_.pop_front();
  return msg;
}

size_t bus_inbox::lags() const {
  std::lock_guard guard{mtx_};
  return lags_;
}

bus_subscriber_actor spawn_bus_subscriber(caf::actor_system& sys, std::shared_ptr<bus_inbox> inbox,
                                          bus_actor replier) {
  return sys.spawn([inbox, replier](bus_subscriber_actor::pointer self)
                     -> bus_subscriber_actor::behavior_type {
    return {
      [self, inbox, replier](bus_message& msg) {
        if (replier && !msg.reply_to.empty())
          self->request(replier, caf::infinite, bus_publish{msg.reply_to, "re:" + msg.payload, ""})
            .then([](bus_ack) {}, [](caf::error&) {});
        inbox->push(std::move(msg));
      },
      [inbox](bus_lagged& lag) { inbox->push(std::move(lag)); },
    };
  });
}

namespace {

template <class Reply, class Request>
caf::expected<Reply> ask(caf::actor_system& sys, const bus_actor& bus, Request msg) {
  caf::scoped_actor self{sys};
  caf::expected<Reply> out{caf::make_error(caf::sec::unexpected_message)};
  self->request(bus, caf::infinite, std::move(msg))
    .receive([&](Reply& reply) { out = std::move(reply); },
             [&](caf::error& err) { out = std::move(err); });
  return out;
}

}  // namespace

caf::expected<bus_ack> bus_publish_to(caf::actor_system& sys, const bus_actor& bus,
                                      bus_publish msg) {
  return ask<bus_ack>(sys, bus, std::move(msg));
}

caf::expected<bus_subscription> bus_subscribe_to(caf::actor_system& sys, const bus_actor& bus,
                                                 bus_subscribe sub) {
  return ask<bus_subscription>(sys, bus, std::move(sub));
}

caf::expected<bus_message> bus_request_of(caf::actor_system& sys, const bus_actor& bus,
                                          bus_request req) {
  return ask<bus_message>(sys, bus, std::move(req));
}

}  // namespace waggle::testing
