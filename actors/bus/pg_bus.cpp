#include "actors/bus/pg_bus.hpp"

#include "actors/bus/bus_check.hpp"
#include "actors/bus/pg_bus_doorbell.hpp"
#include "actors/bus/pg_bus_fetcher.hpp"
#include "actors/bus/pg_bus_keeper.hpp"
#include "actors/bus/pg_bus_publisher.hpp"

namespace waggle {

void pg_bus_state::init(ptr self_ptr, pg_bus_settings s, node_env e) {
  self = self_ptr;
  settings = std::move(s);
  env = std::move(e);
  if (env.stats)
    env.stats->bus.driver = "postgres";
  requests.emplace(settings.node_id);
  auto doorbell = self->spawn<caf::detached + caf::linked>(bus_doorbell_impl, settings,
                                                           env.for_actor("bus-doorbell"));
  publisher = self->spawn<caf::detached + caf::linked>(bus_publisher_impl, settings, doorbell,
                                                       env.for_actor("bus-publisher"));
  fetcher = self->spawn<caf::detached + caf::linked>(bus_fetcher_impl, settings, pg_bus_actor{self},
                                                     env.for_actor("bus-fetcher"));
  self->spawn<caf::detached + caf::linked>(bus_keeper_impl, settings, fetcher,
                                           env.for_actor("bus-keeper"));
}

void pg_bus_state::enqueue(queued q) {
  waiting_bytes += q.msg.payload.size();
  waiting.push_back(std::move(q));
  send_batch();
}

void pg_bus_state::send_batch() {
  if (!in_flight.empty() || waiting.empty())
    return;
  bus_store_batch batch;
  size_t bytes = 0;
  while (!waiting.empty() && batch.messages.size() < settings.max_batch &&
         (batch.messages.empty() || bytes + waiting.front().msg.payload.size()
                                      <= settings.max_batch_bytes)) {
    bytes += waiting.front().msg.payload.size();
    waiting_bytes -= waiting.front().msg.payload.size();
    batch.messages.push_back(waiting.front().msg);
    in_flight.push_back(std::move(waiting.front()));
    waiting.pop_front();
  }
  self->request(publisher, caf::infinite, std::move(batch))
    .then([this](bus_batch_stored& result) { stored(result); },
          [this](caf::error& err) {
            bus_batch_stored failed;
            failed.error = to_string(err);
            stored(failed);
          });
}

void pg_bus_state::stored(bus_batch_stored& result) {
  auto batch = std::move(in_flight);
  in_flight.clear();
  for (size_t i = 0; i < batch.size(); ++i) {
    auto& q = batch[i];
    if (!result.error.empty() || i >= result.ids.size()) {
      auto err = make_error(bus_errc::unavailable, result.error);
      if (env.stats)
        env.stats->bus.count_refused(err);
      if (q.inbox.empty())
        q.promise.deliver(err);
      else if (requests->fail(q.inbox, err))
        close_inbox(q.inbox);
    } else if (result.ids[i] == 0) {
      // A request's message, stored only if someone listens: nobody does.
      if (requests->fail(q.inbox, make_error(bus_errc::no_responders, q.msg.subject)))
        close_inbox(q.inbox);
    } else {
      if (env.stats)
        ++env.stats->bus.published;
      if (q.inbox.empty())
        q.promise.deliver(bus_ack{static_cast<uint64_t>(result.ids[i])});
    }
  }
  send_batch();
}

caf::result<bus_ack> pg_bus_state::publish(bus_publish& msg) {
  if (auto err = bus_check(env, msg))
    return err;
  if (waiting.size() >= settings.max_waiting ||
      waiting_bytes + msg.payload.size() > settings.max_waiting_bytes)
    return bus_refuse(env, make_error(bus_errc::overloaded));
  auto promise = self->make_response_promise<bus_ack>();
  enqueue(queued{bus_outgoing{std::move(msg.subject), std::move(msg.payload),
                              std::move(msg.reply_to), false},
                 promise, {}});
  return promise;
}

caf::result<bus_subscription> pg_bus_state::subscribe(bus_subscribe& sub) {
  if (auto err = bus_check(env, sub))
    return err;
  auto promise = self->make_response_promise<bus_subscription>();
  self->request(fetcher, caf::infinite, bus_watch{sub.subject, sub.group, false, true})
    .then(
      [this, promise, sub](bus_ack) mutable {
        // The fetcher handed over everything committed before this reply
        // (it came first in this mailbox): the subscriber gets what follows.
        if (!table.holds(sub.subscriber.address()))
          self->monitor(sub.subscriber);
        promise.deliver(bus_subscription{table.add(sub.subject, sub.group, sub.subscriber)});
      },
      [promise](caf::error& err) mutable { promise.deliver(err); });
  return promise;
}

void pg_bus_state::unwatch(const bus_table::entry& gone) {
  caf::anon_send(fetcher, bus_watch{gone.subject, gone.group, false, false});
}

void pg_bus_state::unsubscribe(uint64_t id) {
  auto gone = table.remove(id);
  if (!gone)
    return;
  unwatch(*gone);
  if (!table.holds(gone->subscriber.address()))
    self->demonitor(gone->subscriber.address());
}

void pg_bus_state::close_inbox(const std::string& inbox) {
  // Only a watch the fetcher confirmed is ended: a request that expires
  // before its watch is confirmed is closed when the confirmation comes.
  if (watched_inboxes.erase(inbox) > 0)
    caf::anon_send(fetcher, bus_watch{inbox, "", true, false});
}

caf::result<bus_message> pg_bus_state::request(bus_request& req) {
  if (auto err = bus_check(env, req))
    return err;
  // Open requests count too: each holds an inbox watch at the fetcher.
  if (waiting.size() >= settings.max_waiting || requests->size() >= settings.max_waiting ||
      waiting_bytes + req.payload.size() > settings.max_waiting_bytes)
    return bus_refuse(env, make_error(bus_errc::overloaded));
  auto promise = self->make_response_promise<bus_message>();
  auto inbox = requests->open(promise);
  self->delayed_send(self, std::chrono::milliseconds{req.timeout_ms}, bus_request_expired{inbox});
  // The inbox is read before the request is stored: no reply can come first.
  self->request(fetcher, caf::infinite, bus_watch{inbox, "", true, true})
    .then(
      [this, inbox, req](bus_ack) {
        watched_inboxes.insert(inbox);
        if (!requests->is_open(inbox)) {
          close_inbox(inbox);
          return;
        }
        enqueue(queued{bus_outgoing{req.subject, req.payload, inbox, true}, {}, inbox});
      },
      [this, inbox](caf::error& err) { requests->fail(inbox, err); });
  return promise;
}

void pg_bus_state::expired(const std::string& inbox) {
  if (requests->expire(inbox))
    close_inbox(inbox);
}

void pg_bus_state::deliver(bus_fetched& fetched) {
  for (size_t i = 0; i < fetched.messages.size(); ++i) {
    auto& msg = fetched.messages[i];
    if (requests->is_inbox(msg.subject)) {
      auto inbox = msg.subject;
      if (requests->answer(msg))
        close_inbox(inbox);
      continue;
    }
    auto recipients = table.plain(msg.subject);
    for (const auto& group : fetched.groups[i]) {
      if (auto member = table.next_member(msg.subject, group))
        recipients.push_back(std::move(member));
      else if (env.stats)
        env.stats->bus.count_dropped("no_subscriber");
    }
    if (env.stats)
      env.stats->bus.delivered += recipients.size();
    for (auto& r : recipients)
      self->send(r, msg);
  }
  for (const auto& subject : fetched.lagged) {
    auto plain = table.plain(subject);
    for (const auto& group : table.groups(subject))
      plain.push_back(table.next_member(subject, group));
    for (auto& r : plain)
      self->send(r, bus_lagged{subject, 0});
    if (env.stats)
      env.stats->bus.lagged += plain.size();
  }
}

pg_bus_actor::behavior_type pg_bus_impl(pg_bus_state::ptr self, pg_bus_settings settings,
                                        node_env env) {
  self->state.init(self, std::move(settings), std::move(env));
  self->set_down_handler([self](caf::down_msg& down) {
    for (auto& gone : self->state.table.remove_subscriber(down.source))
      caf::anon_send(self->state.fetcher, bus_watch{gone.subject, gone.group, false, false});
  });
  return {
    [self](bus_publish& msg) { return self->state.publish(msg); },
    [self](bus_subscribe& sub) { return self->state.subscribe(sub); },
    [self](bus_unsubscribe u) { self->state.unsubscribe(u.id); },
    [self](bus_request& req) { return self->state.request(req); },
    [self](bus_request_expired& e) { self->state.expired(e.inbox); },
    [self](bus_fetched& f) { self->state.deliver(f); },
    [self](bus_listening q) { return self->delegate(self->state.fetcher, q); },
  };
}

}  // namespace waggle
